"""Files users send arrive in their thread's workspace: a PDF and a text file sent through the
Telegram stand-in (downloaded by python-telegram-bot with getFile) reach the fake model's turn
as /workspace/inbox/... paths, which extract_document and read_file open; another chat's
thread cannot reach them, and nothing is left in the download staging folder."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.pdf_maker import make_pdf
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.harness import provider_for, running_gateway, tool_results, write_config
from tests.store_helpers import fetch_rows

CHANNEL = "team-telegram"
ANN, BOB = 6101, 6202
LABELS = ["fs.read:thread"]
NOTES = "agenda: budget, hiring\n"


def _texts(body: dict[str, Any]) -> str:
    parts = []
    for message in body.get("messages", []):
        content = message["content"]
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if block.get("type") == "text":
                parts.append(block["text"])
    return "\n".join(parts)


class Model:
    """Ann's thread extracts the PDF its context names; Bob's reads his notes, then tries Ann's
    file by her path and by climbing out of his workspace."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}  # file name -> the path the turn was shown
        self.results: dict[str, list[tuple[bool, str]]] = {}  # file name -> its turn's tool results

    def __call__(self, body: dict[str, Any]) -> Reply:
        text, results = _texts(body), tool_results(body)
        shown = re.search(r"/workspace/inbox/\d+/(minutes\.pdf|notes\.txt)", text)
        assert shown is not None, text
        path, name = shown.group(0), shown.group(1)
        self.seen.setdefault(name, path)
        if name == "minutes.pdf":
            calls = [Call("extract_document", {"file_path": path})]
        else:
            ann = self.seen["minutes.pdf"]
            # Ann's chat is the first thread (id 1): its folder is a sibling of Bob's workspace.
            sibling = f"/workspace/../1/{ann[len('/workspace/') :]}"
            calls = [
                Call("read_file", {"file_path": path}),
                Call("extract_document", {"file_path": ann}),
                Call("extract_document", {"file_path": sibling}),
            ]
        if len(results) < len(calls):
            return Reply(tool_calls=[calls[len(results)]])
        self.results[name] = results
        return Reply(text=f"done with {name}")


async def test_inbound_files_are_opened_by_their_workspace_path_and_only_in_their_thread(
    tmp_path: Path,
) -> None:
    pdf = make_pdf(["Decision: the budget is approved."])
    model_script = Model()
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=model_script) as model:
        channel = {
            "name": CHANNEL,
            "type": "telegram",
            "token": telegram.token,
            "api_base_url": telegram.url,
            "pacing": {"per_second": 0, "per_chat_per_second": 0, "group_per_minute": 0},
        }
        config = write_config(
            tmp_path,
            provider=provider_for(model),
            extra={"channels": [channel], "bindings": [{"channel": CHANNEL, "persona": "assistant"}]},
            personas={"assistant": {"capabilities": LABELS}},
        )
        async with running_gateway(config) as gw:
            telegram.inject_message(
                ANN, "what does this say?", user_id=ANN, document=("minutes.pdf", pdf, "application/pdf")
            )
            await telegram.wait_for_sent(ANN, 1, timeout=30)
            telegram.inject_message(
                BOB, "my notes", user_id=BOB, document=("notes.txt", NOTES.encode(), "text/plain")
            )
            await telegram.wait_for_sent(BOB, 1, timeout=30)
            rows = await fetch_rows(
                gw.components.db,
                "SELECT id, thread_id, attachments FROM messages WHERE role = 'user' ORDER BY id",
            )
    first = model.requests[0]
    data = tmp_path / "data"

    # Ann's turn is shown the workspace path, the type, the size and the opening text.
    ann_path = model_script.seen["minutes.pdf"]
    assert ann_path == f"/workspace/inbox/{rows[0]['id']}/minutes.pdf"
    assert f"[document {ann_path} (application/pdf, {len(pdf):,} bytes) begins:]" in _texts(first)
    assert "Decision: the budget is approved." in _texts(first)
    [(failed, extracted)] = model_script.results["minutes.pdf"]
    assert not failed and "Decision: the budget is approved." in json.loads(extracted)["text"]

    # Bob reads his own file; Ann's is not in his workspace, and climbing out is refused.
    read, by_her_path, climbing = model_script.results["notes.txt"]
    assert read[0] is False and "agenda: budget, hiring" in read[1]
    assert by_her_path[0] is True and "does not exist" in by_her_path[1]
    assert climbing[0] is True and "climbs above /workspace" in climbing[1]
    assert "approved" not in json.dumps(model_script.results["notes.txt"])

    # On disk: each file in its own thread's workspace, none left in staging, none still staged.
    for row, name in zip(rows, ("minutes.pdf", "notes.txt"), strict=True):
        workspace = data / "workspaces" / "assistant" / "threads" / str(row["thread_id"])
        assert (workspace / "inbox" / str(row["id"]) / name).is_file()
        [entry] = json.loads(row["attachments"])
        assert entry["path"] == f"/workspace/inbox/{row['id']}/{name}" and "staged" not in entry
    assert (rows[0]["thread_id"], rows[1]["thread_id"]) == (1, 2)
    assert [p for p in (data / "files").rglob("*") if p.is_file()] == []
