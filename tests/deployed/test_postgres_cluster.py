"""A cluster as deployed: three ``talon run`` nodes on one PostgreSQL database with a
Telegram bot, a Slack app and a Discord bot split over two shards, the stand-ins slow and
sometimes failing. A burst over many chats of all three is answered by the nodes together;
the first node, which polls Telegram, holds both Discord shards' gateway sessions and leads
the scheduler, is killed with kill -9 mid-burst. Polling and each shard's session move to
other nodes within ``failover_seconds`` (messages to guilds of both shards after the kill
are answered), Slack's unacknowledged envelopes come back over the other nodes'
connections, a schedule due after the kill fires once on the new leader, and every chat is
answered, nothing twice, nothing left in the outbox."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from connectors.base import ThreadKey
from gateway.store.engines import open_store
from gateway.store.schedules import create_schedule
from gateway.store.threads import upsert_thread
from tests.deployed import test_discord_burst as discord_burst
from tests.deployed import test_slack_burst as slack_burst
from tests.deployed.support import (
    fake_process,
    get_json,
    inject_rounds,
    log_failures,
    outbox_rows,
    post_json,
    reported_unknown,
    unfinished_preview,
    write_deployed_config,
)
from tests.deployed.test_telegram_burst import _burst, answered
from tests.e2e.daemon import Daemon, talon, talon_env

pytestmark = pytest.mark.timeout(480)

CHATS = 150  # Telegram
DMS = 20  # Slack and Discord each
PER_CHAT = 3
FAILOVER = 15.0  # the default: a heartbeat late under a loaded CI machine does not move work
GUILDS = 3  # per Discord shard, one text channel each
POLLER_ROLE = "channel:team-telegram"
SHARD_ROLES = ("channel:team-discord:shard-0-of-2", "channel:team-discord:shard-1-of-2")
RECEIVER_ROLES = (POLLER_ROLE, *SHARD_ROLES)
SCHEDULE_CHAT = 1000  # a chat of the burst: the stand-in knows only chats that wrote to the bot


def _node(root: Path, name: str, fakes: dict[str, Any], model_url: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    telegram, slack, discord = fakes["telegram"], fakes["slack"], fakes["discord"]
    channels = [
        {
            "name": "team-telegram",
            "type": "telegram",
            "token": telegram.info["token"],
            "api_base_url": telegram.url,
        },
        {
            "name": "team-slack",
            "type": "slack",
            "bot_token": slack.info["bot_token"],
            "app_token": slack.info["app_token"],
            "api_base_url": slack.url,
        },
        {
            "name": "team-discord",
            "type": "discord",
            "token": discord.info["token"],
            "api_base_url": discord.url,
            "gateway_url": discord.info["gateway_url"],
            "shard_count": 2,
        },
    ]
    database = {
        "url": "${TALON_DATABASE_URL}",
        "cluster": True,
        "node_id": name,
        "failover_seconds": FAILOVER,
    }
    return write_deployed_config(root, model_url=model_url, channels=channels, database=database)


def _questions(guild_channels: list[str]) -> dict[str, dict[str, str]]:
    """Per stand-in, each chat's last message."""
    last = PER_CHAT - 1
    return {
        "telegram": {str(1000 + c): f"chat {c} message {last}" for c in range(CHATS)},
        "slack": {slack_burst._dm(c): f"channel {c} message {last}" for c in range(DMS)},
        "discord": {discord_burst._dm(c): f"channel {c} message {last}" for c in range(DMS)}
        | {channel: _after_the_kill(channel) for channel in guild_channels},
    }


def _after_the_kill(channel: str) -> str:
    return f"guild channel {channel} after the kill"


def _to_guilds(channels: list[str], text: Callable[[str], str]) -> dict[str, Any]:
    """An inject of a message to the bot (mentioned) in every guild channel."""
    return {
        "messages": [
            {
                "channel_id": channel,
                "author_id": str(9000 + n),
                "text": text(channel),
                "guild": True,
                "mention": True,
            }
            for n, channel in enumerate(channels)
        ]
    }


def _in_the_echo(texts: list[str], question: str) -> bool:
    """A guild message's echo may carry its author ahead of the text."""
    return any(
        t.startswith("echo: ")
        and any(line.endswith(question) for line in t.removeprefix("echo: ").split("\n"))
        for t in texts
    )


async def _sent(fakes: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    return {name: await get_json(f"{fake.url}/_fake/sent") for name, fake in fakes.items()}


def _waiting(
    sent: dict[str, dict[str, list[str]]], rows: list[dict[str, Any]], guild_channels: list[str]
) -> list[str]:
    """The chats whose last message has no answer, shown or reported in flight at the kill."""
    return [
        chat
        for name, questions in _questions(guild_channels).items()
        for chat, question in questions.items()
        if not (answered if chat not in guild_channels else _in_the_echo)(sent[name].get(chat, []), question)
        and not reported_unknown(rows, chat, question)
    ]


def _doubled(shown: dict[str, list[str]]) -> list[tuple[str, str]]:
    delivered = Counter(
        (chat, text) for chat, texts in shown.items() for text in texts if not unfinished_preview(text)
    )
    return [key for key, n in delivered.items() if n > 1]


async def _one_shot(url: str, scratch: Path, chat: int, prompt: str, delay: float) -> None:
    """A one-shot schedule of the persona answering into ``chat``, due in ``delay`` seconds,
    written straight into the store as create_schedule would."""
    await asyncio.to_thread(scratch.mkdir, parents=True, exist_ok=True)
    db = await open_store(url, scratch, migrate=False)
    at = time.time() + delay

    def write(conn: Any) -> None:
        thread = upsert_thread(
            conn,
            ThreadKey("team-telegram", str(chat)),
            chat_type="private",
            persona="assistant",
            now=time.time(),
        )
        create_schedule(
            conn,
            persona="assistant",
            thread_id=thread.id,
            label=prompt,
            cron_expr=None,
            run_at=at,
            timezone="UTC",
            prompt=prompt,
            prompt_file=None,
            next_run_at=at,
            now=time.time(),
        )

    try:
        await db.run_transaction(write)
    finally:
        await db.close()


def _replies(sent: dict[str, list[str]], chat: int, prompt: str) -> int:
    return sum(1 for text in sent.get(str(chat), []) if prompt in text)


def _claims(url: str) -> list[Any]:
    with psycopg.connect(url) as pg:
        return pg.execute(
            "SELECT thread_id, node_id, expires_at - extract(epoch FROM now()) FROM outbox_claims"
        ).fetchall()


def _scheduler_lines(log: str) -> str:
    return "\n".join(line for line in log.splitlines() if "schedul" in line)


def _runs_by_node(url: str) -> Counter[str]:
    with psycopg.connect(url) as pg:
        rows = pg.execute("SELECT node_id, count(*) FROM runs GROUP BY node_id").fetchall()
    return Counter({str(node): int(n) for node, n in rows})


async def test_three_nodes_share_a_burst_and_the_receivers_move_after_kill_9(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.new_database()
    env = talon_env({"TALON_DATABASE_URL": url})
    names = ("n1", "n2", "n3")
    chaos = ("--latency", "0.05:0.2", "--fail-rate", "0.02")
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path, *chaos) as bot_api,
        fake_process(
            "tests.fakes.slack_api.standalone", tmp_path, *chaos, "--redeliver-after", "3", "--spread"
        ) as slack,
        fake_process(
            "tests.fakes.discord_api.standalone", tmp_path, *chaos, "--identify-interval", "5"
        ) as discord,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai", "--delay", "0.1") as model,
    ):
        fakes = {"telegram": bot_api, "slack": slack, "discord": discord}
        guilds = [
            await post_json(f"{discord.url}/_fake/guilds", {"shard": shard, "of": 2})
            for shard in (0, 1)
            for _ in range(GUILDS)
        ]
        guild_channels = [guild["channel_id"] for guild in guilds]
        configs = {name: _node(tmp_path / name, name, fakes, model.url) for name in names}
        nodes = {name: Daemon(configs[name], env) for name in names}
        async with nodes["n1"], nodes["n2"], nodes["n3"]:
            await nodes["n1"].start(tmp_path / "n1" / "data", ready_timeout=60)  # it migrates
            await asyncio.gather(
                *(nodes[n].start(tmp_path / n / "data", ready_timeout=60) for n in names[1:])
            )
            # The first node holds the poller and both shards' sessions; the others wait for
            # them. Its second shard starts 5 s after the first, as Discord allows.
            async with asyncio.timeout(30):
                while (
                    not all(
                        f"{role} runs on another node" in nodes[n].log()
                        for n in names[1:]
                        for role in RECEIVER_ROLES
                    )
                    or (await get_json(f"{discord.url}/_fake/stats"))["identifies"] < 2
                ):
                    await asyncio.sleep(0.1)
            _, status, problems = await talon("status", "--config", str(configs["n2"]), env=env)
            assert "cluster: 3 nodes; this is n2" in status, status + problems
            assert status.count(": alive,") == 3, status

            await post_json(f"{bot_api.url}/_fake/inject", {"messages": _burst(CHATS, PER_CHAT)})
            await asyncio.gather(
                inject_rounds(slack.url, slack_burst._rounds(DMS, PER_CHAT), 0.3),
                inject_rounds(discord.url, discord_burst._rounds(DMS, PER_CHAT), 0.3),
                post_json(
                    f"{discord.url}/_fake/inject", _to_guilds(guild_channels, lambda c: "before the kill")
                ),
            )
            await _one_shot(url, tmp_path / "scratch", SCHEDULE_CHAT, "before the kill", 1.0)
            # Mid-burst, once the first leader has fired the schedule due before the kill.
            async with asyncio.timeout(120):
                while True:
                    sent_so_far = await get_json(f"{bot_api.url}/_fake/sent")
                    if sum(map(len, sent_so_far.values())) >= 60 and _replies(
                        sent_so_far, SCHEDULE_CHAT, "before the kill"
                    ):
                        break
                    await asyncio.sleep(0.05)
            await _one_shot(url, tmp_path / "scratch", SCHEDULE_CHAT, "after the kill", 4.0)
            await nodes["n1"].kill()
            killed_at = time.monotonic()
            took_over: dict[str, float] = {}
            async with asyncio.timeout(FAILOVER + 20):
                while len(took_over) < len(RECEIVER_ROLES):
                    for role in RECEIVER_ROLES:
                        if role not in took_over and any(
                            f"{role}: taken over by this node" in nodes[n].log() for n in names[1:]
                        ):
                            took_over[role] = time.monotonic() - killed_at
                    await asyncio.sleep(0.1)
            # Discord delivers to a session what happens after its IDENTIFY: once both shards'
            # new sessions are up, every guild gets a message.
            async with asyncio.timeout(30):
                while (await get_json(f"{discord.url}/_fake/stats"))["identifies"] < 4:
                    await asyncio.sleep(0.1)
            await post_json(f"{discord.url}/_fake/inject", _to_guilds(guild_channels, _after_the_kill))

            deadline = time.monotonic() + 300
            while True:
                rows = outbox_rows(tmp_path / "n2" / "data", url)
                sent = await _sent(fakes)
                waiting = _waiting(sent, rows, guild_channels)
                pending = [r for r in rows if r["status"] in ("pending", "sending")]  # with their chats
                fired = _replies(sent["telegram"], SCHEDULE_CHAT, "after the kill")
                if not waiting and not pending and fired:
                    break
                assert time.monotonic() < deadline, (
                    f"{len(waiting)} chats unanswered (e.g. {waiting[:5]}), {len(pending)} rows open, "
                    f"schedule fired {fired} times; "
                    + "\n".join(_scheduler_lines(nodes[n].log()) for n in names)
                    + f"\nopen rows: {pending}\nclaims: {_claims(url)}"
                )
                await asyncio.sleep(0.5)
            _, after, _ = await talon("status", "--config", str(configs["n2"]), env=env)
            # Before the nodes stop: the first to stop hands its roles to the last.
            slack_stats = await get_json(f"{slack.url}/_fake/stats")
            discord_stats = await get_json(f"{discord.url}/_fake/stats")
            for name in names[1:]:
                assert await nodes[name].stop() == 0
        messages = await get_json(f"{bot_api.url}/_fake/messages")
        shown = {chat: [m["text"] for m in ms if not m["deleted"]] for chat, ms in messages.items()}
        sent = await _sent(fakes)

    assert all(seconds < FAILOVER + 10 for seconds in took_over.values()), took_over
    # One gateway session per shard at a time: n1's, then those of the nodes that took them over.
    assert sorted(discord_stats["shards"]) == [[0, 2], [0, 2], [1, 2], [1, 2]], discord_stats
    # Slack spread its envelopes over every node's connection; n1's unacknowledged ones came back.
    assert slack_stats["connections"] >= 3 and slack_stats["unacked"] == 0, slack_stats
    # Each schedule ran once: the second on the node that took the scheduler over.
    assert [_replies(shown, SCHEDULE_CHAT, p) for p in ("before the kill", "after the kill")] == [1, 1], (
        shown.get(str(SCHEDULE_CHAT))
    )
    assert any("scheduler: taken over by this node" in nodes[n].log() for n in names[1:])
    assert re.search(r"took over from lost node\(s\) n1", nodes["n2"].log() + nodes["n3"].log())
    assert "cluster: 2 nodes" in after and "node n1" not in after, after
    # Active/active: the burst's turns ran on more than one node.
    by_node = _runs_by_node(url)
    assert sum(1 for n in names if by_node[n] > 0) >= 2, by_node
    rows = outbox_rows(tmp_path / "n2" / "data", url)
    by_status = Counter(r["status"] for r in rows)
    assert set(by_status) <= {"sent", "unknown"}, by_status
    for platform in (shown, sent["slack"], sent["discord"]):
        doubled = _doubled(platform)
        assert not doubled, f"sent twice: {doubled[:5]}"
    telegram_rows = [r for r in rows if str(r["chat_id"]) in shown]
    showing = sum(1 for r in telegram_rows if r["status"] == "sent" and r["format"] != "drop_preview")
    delivered = sum(len([t for t in texts if not unfinished_preview(t)]) for texts in shown.values())
    unknown = sum(1 for r in telegram_rows if r["status"] == "unknown")
    assert showing <= delivered <= showing + unknown
    for name in names[1:]:
        assert log_failures(nodes[name].log()) == [], name
