"""Workspace tools in real turns: the fake model calls bash and extract_document, and an inbound
document reaches the model's context already extracted."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from connectors.base import Attachment, InboundEvent, Sender
from gateway.sandbox import sandbox_problem
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.pdf_maker import make_pdf
from tests.harness import provider_for, running_gateway, say, tool_texts, write_config

LABELS = ["fs.read:thread", "fs.write:thread", "shell.exec:sandbox"]


@pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")
async def test_the_model_runs_bash_and_extracts_a_document_it_made(tmp_path: Path) -> None:
    pdf = make_pdf(["The launch is on Tuesday."])
    script = (
        f"python3 -c \"import sys; open('/workspace/plan.pdf','wb').write(bytes.fromhex('{pdf.hex()}'))\""
    )

    def respond(body: dict[str, Any]) -> Reply:
        results = tool_texts(body)
        if not results:
            return Reply(
                tool_calls=[Call("bash", {"command": f"{script} && ls /workspace && cat /etc/shadow"})]
            )
        if len(results) == 1:
            return Reply(tool_calls=[Call("extract_document", {"file_path": "/workspace/plan.pdf"})])
        shell, document = json.loads(results[0]), json.loads(results[1])
        return Reply(
            text=f"ls: {shell['stdout'].strip()}; exit {shell['exit_code']}; pdf: {document['text'].strip()}"
        )

    async with FakeAnthropic(responder=respond) as fake:
        config = write_config(
            tmp_path, provider=provider_for(fake), personas={"assistant": {"capabilities": LABELS}}
        )
        async with running_gateway(config) as gw:
            turn = await say(gw, "make the plan and read it back", timeout=60)
        tools = {t["name"] for t in fake.requests[0]["tools"]}
    assert {"bash", "extract_document", "read_file"} <= tools
    assert turn.text == "ls: plan.pdf; exit 1; pdf: The launch is on Tuesday."


async def test_a_persona_without_the_labels_is_offered_none_of_them(tmp_path: Path) -> None:
    async with FakeAnthropic(responder=lambda body: Reply(text="ok")) as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["memory.access:thread"]}},
        )
        async with running_gateway(config) as gw:
            await say(gw, "hello")
        tools = {t["name"] for t in fake.requests[0]["tools"]}
    assert tools == {"memory_access", "memory_search", "memory_update", "procedure_write"}


async def test_an_inbound_document_is_extracted_when_it_arrives(tmp_path: Path) -> None:
    inbox = tmp_path / "inbound"
    inbox.mkdir()
    document = inbox / "minutes.pdf"
    document.write_bytes(make_pdf(["Decision: the budget is approved."]))
    size = document.stat().st_size
    async with FakeAnthropic(responder=lambda body: Reply(text="read it")) as fake:
        config = write_config(tmp_path, provider=provider_for(fake))
        async with running_gateway(config) as gw:
            console = gw.components.control.console(None)
            assert console is not None
            event = InboundEvent(
                channel="console",
                event_id=uuid.uuid4().hex,
                thread_key=console.thread_key("main"),
                chat_type="dm",
                sender=Sender(id="local:ann", display_name="ann"),
                text="what does this PDF say?",
                attachments=(Attachment("minutes.pdf", str(document), "application/pdf", size),),
            )
            result = await gw.components.intake(event)
            for _ in range(200):
                if fake.requests:
                    break
                await asyncio.sleep(0.05)
        prompt = _texts(fake.requests[0]["messages"])
    assert "Decision: the budget is approved." in prompt
    # Moved into the thread's workspace; the model is shown the path the file tools take.
    shown = f"/workspace/inbox/{result.message_id}/minutes.pdf"
    assert f"[document {shown} (application/pdf, {size:,} bytes) begins:]" in prompt
    assert not document.exists()


def _texts(messages: list[dict[str, Any]]) -> str:
    parts = []
    for message in messages:
        content = message["content"]
        blocks = content if isinstance(content, list) else [{"text": content}]
        parts += [b.get("text", "") for b in blocks]
    return "\n".join(parts)
