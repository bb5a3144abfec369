"""Sender roles in a group on each platform: the owner's turn may write state, a guest's turn
is neither offered the tool nor allowed it when its model calls it anyway (the bridge refuses
and audits the refusal)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import tool_results
from tests.integration.chat_policy.groups import PLATFORMS, group_gateway, group_on
from tests.store_helpers import fetch_rows

WRITE = Call("state_put", {"namespace": "notes", "key": "plan", "value": {"step": 1}})


def _respond(body: dict[str, Any]) -> Reply:
    results = tool_results(body)
    if not results:
        return Reply(tool_calls=[WRITE])
    is_error, text = results[-1]
    return Reply(text=("REFUSED: " if is_error else "DONE: ") + text)


def _offered(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body.get("tools", [])]


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_guest_is_refused_a_tool_the_owner_may_use(tmp_path: Path, platform: str) -> None:
    async with group_on(platform) as group, FakeAnthropic(responder=_respond) as model:
        owner, guest = group.users
        persona = {
            "capabilities": ["state.write:persona", "state.read:persona"],
            "role_capabilities": {"guest": ["state.read:persona"]},
        }
        channel = {"roles": {"owner": [owner], "guest": [guest]}}
        async with group_gateway(
            tmp_path, group, model, channel=channel, personas={"assistant": persona}
        ) as gateway:
            await group.say(owner, "save the plan")
            first = await group.replies(1)
            await group.say(guest, "save the plan")
            both = await group.replies(2)
            await gateway.components.host_tools.bridge.audit.flush()  # audit rows are written in batches
            audit = await fetch_rows(
                gateway.components.db, "SELECT tool, decision, detail FROM audit_log ORDER BY id"
            )

    assert first[0].text.startswith("DONE: ")
    assert json.loads(first[0].text.removeprefix("DONE: "))["version"] == 1
    assert both[1].text.startswith("REFUSED: ")
    assert "state.write" in both[1].text  # the refusal names the label the guest lacks
    owner_request, guest_request = model.requests[0], model.requests[2]
    assert "state_put" in _offered(owner_request)
    assert "state_put" not in _offered(guest_request) and "state_get" in _offered(guest_request)
    refused = [row for row in audit if row["tool"] == "state_put" and row["decision"] == "refused"]
    assert len(refused) == 1 and "state.write" in refused[0]["detail"]
