"""A cluster as deployed behind a load balancer: two ``talon run`` nodes on one PostgreSQL
database receive a Telegram bot's webhook and a Slack app's HTTP events through a round-robin
balancer in a process of its own. The balancer loses some of the nodes' answers, so Telegram
and Slack send those requests again, often to the other node. The first node is killed with
kill -9 mid-burst; the balancer then finds it refusing connections and sends everything to
the second, which takes over the turns and sends the first left behind. Every message is
stored once and every chat answered once, nothing is left in the outbox, and both nodes took
requests and ran turns. The nodes share one ``workspaces_dir``, and ``talon doctor`` on one
of them finds both nodes' markers there."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.deployed import test_slack_burst as slack_burst
from tests.deployed.support import (
    fake_process,
    free_port,
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
from tests.fakes.slack_api.model import SIGNING_SECRET

pytestmark = pytest.mark.timeout(300)

CHATS = 60  # Telegram
DMS = 15  # Slack
PER_CHAT = 3
AFTER = 10  # chats of each that write again once the first node is dead
FAILOVER = 10.0
HOOK_SECRET = "webhook-secret-0123456789"
NAMES = ("n1", "n2")


def _node(root: Path, name: str, fakes: dict[str, Any], ports: tuple[int, int]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    telegram, slack, balancer = fakes["telegram"], fakes["slack"], fakes["balancer"]
    channels = [
        {
            "name": "team-telegram",
            "type": "telegram",
            "token": telegram.info["token"],
            "api_base_url": telegram.url,
            "webhook_url": f"{balancer.url}/telegram/hook",
            "webhook_secret": HOOK_SECRET,
            "webhook_port": ports[0],
        },
        {
            "name": "team-slack",
            "type": "slack",
            "bot_token": slack.info["bot_token"],
            "signing_secret": SIGNING_SECRET,
            "api_base_url": slack.url,
            "http_port": ports[1],
        },
    ]
    database = {
        "url": "${TALON_DATABASE_URL}",
        "cluster": True,
        "node_id": name,
        "failover_seconds": FAILOVER,
    }
    return write_deployed_config(
        root,
        model_url=fakes["model"].url,
        channels=channels,
        database=database,
        workspaces_dir=str(fakes["workspaces"]),  # one folder every node mounts, as docs/scaling.md asks
    )


def _questions() -> dict[str, dict[str, str]]:
    """Per stand-in, each chat's last message."""
    last = f"message {PER_CHAT - 1}"
    telegram = {str(1000 + c): f"chat {c} {last}" for c in range(CHATS)}
    slack = {slack_burst._dm(c): f"channel {c} {last}" for c in range(DMS)}
    telegram |= {str(1000 + c): f"chat {c} after the kill" for c in range(AFTER)}
    slack |= {slack_burst._dm(c): f"channel {c} after the kill" for c in range(AFTER)}
    return {"telegram": telegram, "slack": slack}


def _waiting(sent: dict[str, dict[str, list[str]]], rows: list[dict[str, Any]]) -> list[str]:
    """The chats whose last message has no answer, shown or reported in flight at the kill."""
    return [
        chat
        for name, questions in _questions().items()
        for chat, question in questions.items()
        if not answered(sent[name].get(chat, []), question) and not reported_unknown(rows, chat, question)
    ]


def _stored_messages(url: str) -> dict[str, Counter[str]]:
    """Per channel, how often each user message was stored."""
    with psycopg.connect(url) as pg:
        rows = pg.execute(
            "SELECT t.channel, m.text FROM messages m JOIN threads t ON t.id = m.thread_id WHERE m.role = 'user'"
        ).fetchall()
    stored: dict[str, Counter[str]] = {}
    for channel, text in rows:
        stored.setdefault(channel, Counter())[text] += 1
    return stored


def _runs_by_node(url: str) -> Counter[str]:
    with psycopg.connect(url) as pg:
        rows = pg.execute("SELECT node_id, count(*) FROM runs GROUP BY node_id").fetchall()
    return Counter({str(node): int(n) for node, n in rows})


def _answered_by(balancer_stats: dict[str, Any], prefix: str, port: int) -> int:
    return int(balancer_stats[prefix].get(str(port), {}).get("answered", 0))


async def test_two_nodes_behind_a_balancer_take_webhooks_and_http_events_once_across_kill_9(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.new_database()
    env = talon_env({"TALON_DATABASE_URL": url})
    ports = {name: (free_port(), free_port()) for name in NAMES}  # (Telegram webhook, Slack events)
    routes = [
        "--route",
        "/telegram=" + ",".join(str(ports[n][0]) for n in NAMES),
        "--route",
        "/slack=" + ",".join(str(ports[n][1]) for n in NAMES),
    ]
    chaos = ("--latency", "0.05:0.2", "--fail-rate", "0.02")
    async with fake_process(
        "tests.fakes.load_balancer", tmp_path, *routes, "--drop-rate", "0.08"
    ) as balancer:
        async with (
            fake_process("tests.fakes.telegram_api.standalone", tmp_path, *chaos) as bot_api,
            fake_process(
                "tests.fakes.slack_api.standalone",
                tmp_path,
                *chaos,
                "--redeliver-after",
                "2",
                "--events-url",
                f"{balancer.url}/slack/events",
            ) as slack,
            fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai", "--delay", "0.1") as model,
        ):
            fakes = {
                "telegram": bot_api,
                "slack": slack,
                "balancer": balancer,
                "model": model,
                "workspaces": tmp_path / "shared-workspaces",
            }
            configs = {name: _node(tmp_path / name, name, fakes, ports[name]) for name in NAMES}
            nodes = {name: Daemon(configs[name], env) for name in NAMES}
            async with nodes["n1"], nodes["n2"]:
                await nodes["n1"].start(tmp_path / "n1" / "data", ready_timeout=60)  # it migrates
                await nodes["n2"].start(tmp_path / "n2" / "data", ready_timeout=60)
                _, doctor, _ = await talon("doctor", "--config", str(configs["n2"]), env=env)
                assert "the same folder on all 2 live nodes" in doctor, doctor

                await post_json(f"{bot_api.url}/_fake/inject", {"messages": _burst(CHATS, PER_CHAT)})
                slack_burst_sent = asyncio.create_task(
                    inject_rounds(slack.url, slack_burst._rounds(DMS, PER_CHAT), 0.3)
                )
                # Mid-burst, once both nodes have taken requests of both platforms and answered some.
                async with asyncio.timeout(120):
                    while True:
                        stats = await get_json(f"{balancer.url}/_lb/stats")
                        sent_so_far = await get_json(f"{bot_api.url}/_fake/sent")
                        if sum(map(len, sent_so_far.values())) >= 30 and all(
                            _answered_by(stats, prefix, ports[n][i]) > 0
                            for n in NAMES
                            for i, prefix in enumerate(("/telegram", "/slack"))
                        ):
                            break
                        await asyncio.sleep(0.05)
                await nodes["n1"].kill()
                await slack_burst_sent
                after = [
                    {"chat_id": 1000 + c, "user_id": 1000 + c, "text": f"chat {c} after the kill"}
                    for c in range(AFTER)
                ]
                await post_json(f"{bot_api.url}/_fake/inject", {"messages": after})
                await post_json(
                    f"{slack.url}/_fake/inject",
                    {
                        "messages": [
                            {
                                "channel": slack_burst._dm(c),
                                "user": f"U0USER{c:03d}",
                                "text": f"channel {c} after the kill",
                            }
                            for c in range(AFTER)
                        ]
                    },
                )

                deadline = time.monotonic() + 180
                while True:
                    rows = outbox_rows(tmp_path / "n2" / "data", url)
                    sent = {
                        "telegram": await get_json(f"{bot_api.url}/_fake/sent"),
                        "slack": await get_json(f"{slack.url}/_fake/sent"),
                    }
                    waiting = _waiting(sent, rows)
                    pending = [r for r in rows if r["status"] in ("pending", "sending")]
                    # Requests whose answer was lost come again until one is answered.
                    telegram_stats = await get_json(f"{bot_api.url}/_fake/stats")
                    slack_stats = await get_json(f"{slack.url}/_fake/stats")
                    unconfirmed = telegram_stats["pending_updates"] + slack_stats["unacked"]
                    if not waiting and not pending and not unconfirmed:
                        break
                    assert time.monotonic() < deadline, (
                        f"{len(waiting)} chats unanswered (e.g. {waiting[:5]}), {len(pending)} rows open: "
                        f"{pending[:5]}; unconfirmed: {telegram_stats} {slack_stats}"
                    )
                    await asyncio.sleep(0.5)
                balancer_stats = await get_json(f"{balancer.url}/_lb/stats")
                assert await nodes["n2"].stop() == 0
            messages = await get_json(f"{bot_api.url}/_fake/messages")
            shown = {chat: [m["text"] for m in ms if not m["deleted"]] for chat, ms in messages.items()}
            slack_sent = await get_json(f"{slack.url}/_fake/sent")

    # The balancer lost answers, so requests came again; once n1 was dead it refused
    # connections and the balancer went on to n2.
    dropped = sum(c.get("dropped", 0) for route in balancer_stats.values() for c in route.values())
    assert dropped > 0 and telegram_stats["webhook_answers"].get("502", 0) > 0, balancer_stats
    for i, prefix in enumerate(("/telegram", "/slack")):
        assert balancer_stats[prefix][str(ports["n1"][i])].get("refused", 0) > 0, balancer_stats
    # Each message was stored once, whichever node took it and however often it came.
    stored = _stored_messages(url)
    expected = {
        "team-telegram": [m["text"] for m in _burst(CHATS, PER_CHAT)] + [m["text"] for m in after],
        "team-slack": [m["text"] for r in slack_burst._rounds(DMS, PER_CHAT) for m in r]
        + [f"channel {c} after the kill" for c in range(AFTER)],
    }
    for channel, texts in expected.items():
        assert stored[channel] == Counter(texts), channel
    # Active/active: both nodes ran turns.
    by_node = _runs_by_node(url)
    assert by_node["n1"] > 0 and by_node["n2"] > 0, by_node
    rows = outbox_rows(tmp_path / "n2" / "data", url)
    assert set(Counter(r["status"] for r in rows)) <= {"sent", "unknown"}
    for platform in (shown, slack_sent):
        delivered = Counter(
            (chat, text) for chat, texts in platform.items() for text in texts if not unfinished_preview(text)
        )
        doubled = [key for key, n in delivered.items() if n > 1]
        assert not doubled, f"sent twice: {doubled[:5]}"
    assert log_failures(nodes["n2"].log()) == []
