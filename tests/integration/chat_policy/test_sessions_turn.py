"""Per-user sessions in a group on each platform: with ``session_scope: user`` two members
talking to the bot in the same place get a conversation each (neither's turn sees the other's
messages), and each reply still goes to that place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.integration.chat_policy.groups import PLATFORMS, group_gateway, group_on
from tests.store_helpers import fetch_rows


def _transcript(body: dict[str, Any]) -> str:
    parts = []
    for message in body["messages"]:
        content = message["content"]
        parts.append(content if isinstance(content, str) else " ".join(b.get("text", "") for b in content))
    return "\n".join(parts)


def _answer(body: dict[str, Any]) -> Reply:
    return Reply(text=f"re: {last_user_text(body).rsplit(' ', 1)[-1]}")


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_each_member_of_a_group_gets_their_own_conversation(tmp_path: Path, platform: str) -> None:
    async with group_on(platform) as group, FakeAnthropic(responder=_answer) as model:
        ann, bob = group.users
        async with group_gateway(tmp_path, group, model, channel={"session_scope": "user"}) as gateway:
            place = await group.say(ann, "my secret word is apple")
            await group.replies(1)
            await group.say(bob, "my secret word is pear", place=place)
            await group.replies(2)
            await group.say(ann, "what was my word", place=place)
            replies = await group.replies(3)
            threads = await fetch_rows(
                gateway.components.db, "SELECT id, chat_id, topic FROM threads ORDER BY id"
            )
            runs = await fetch_rows(gateway.components.db, "SELECT thread_id FROM runs ORDER BY id")

    bob_saw, ann_later = _transcript(model.requests[1]), _transcript(model.requests[2])
    assert "apple" not in bob_saw and "pear" in bob_saw
    assert "apple" in ann_later and "pear" not in ann_later
    assert len(threads) == 2 and threads[0]["chat_id"] == threads[1]["chat_id"]
    assert [r["thread_id"] for r in runs] == [threads[0]["id"], threads[1]["id"], threads[0]["id"]]
    assert [r.text for r in replies] == ["re: apple", "re: pear", "re: word"]
    assert {r.place for r in replies} == {place}  # every reply where its member spoke
