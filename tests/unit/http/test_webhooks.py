"""Webhook routes over a real aiohttp server with a recording intake: each sender's signature,
the event filter, the rate limit, dedupe answers, and the prompt template's safe filling."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from connectors.base import InboundEvent, IntakeResult, IntakeStatus
from gateway.http.server import HttpServer
from gateway.http.settings import HttpSettings, WebhookRoute
from gateway.http.webhook_payload import fill_prompt
from gateway.http.webhooks import WebhooksFeature

SECRET = "s" * 24


def _route(kind: str, **extra: object) -> WebhookRoute:
    return WebhookRoute.model_validate(
        {
            "name": kind,
            "path": f"/hooks/{kind}",
            "auth": kind,
            "secret": SECRET,
            "prompt": "event {action}",
            "persona": "ops",
            "channel": "tg",
            "chat": 5,
            **extra,
        }
    )


class Intake:
    def __init__(self) -> None:
        self.events: list[InboundEvent] = []

    async def __call__(self, event: InboundEvent) -> IntakeResult:
        seen = any(e.event_id == event.event_id for e in self.events)
        self.events.append(event)
        return IntakeResult(IntakeStatus.DUPLICATE if seen else IntakeStatus.ACCEPTED, 1, 1)


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, Intake]]:
    intake = Intake()
    routes = [_route("github", events=["push"]), _route("gitlab"), _route("bearer", per_minute=2)]
    server = HttpServer(HttpSettings(listen="127.0.0.1:0"), [WebhooksFeature(routes, intake)])
    await server.start()
    try:
        assert server.url is not None
        yield server.url, intake
    finally:
        await server.stop()


async def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as resp:
        return resp.status, (await resp.json())["status"]


async def test_each_sender_kind_is_checked_and_a_wrong_secret_stores_nothing(served) -> None:
    url, intake = served
    body = json.dumps({"action": "opened"}).encode()
    good = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    push = {"X-GitHub-Event": "push", "X-GitHub-Delivery": "abc"}
    assert await _post(
        f"{url}/hooks/github", body, {**push, "X-Hub-Signature-256": "sha256=" + "0" * 64}
    ) == (
        401,
        "bad signature",
    )
    assert await _post(f"{url}/hooks/github", body, push) == (401, "bad signature")
    assert await _post(f"{url}/hooks/gitlab", body, {"X-Gitlab-Token": "wrong"}) == (401, "bad signature")
    assert await _post(f"{url}/hooks/bearer", body, {"Authorization": "Bearer nope"}) == (
        401,
        "bad signature",
    )
    assert intake.events == []

    assert await _post(f"{url}/hooks/github", body, {**push, "X-Hub-Signature-256": good}) == (
        202,
        "accepted",
    )
    assert await _post(f"{url}/hooks/github", body, {**push, "X-Hub-Signature-256": good}) == (
        202,
        "duplicate",
    )
    issues = {**push, "X-GitHub-Event": "issues", "X-Hub-Signature-256": good}
    assert await _post(f"{url}/hooks/github", body, issues) == (202, "ignored")
    assert await _post(f"{url}/hooks/gitlab", body, {"X-Gitlab-Token": SECRET}) == (202, "accepted")
    assert await _post(f"{url}/hooks/gitlab", b"[1,", {"X-Gitlab-Token": SECRET}) == (
        400,
        "the body is not JSON",
    )
    first = intake.events[0]
    assert first.event_id == "webhook:github:abc" and first.persona == "ops"
    assert (first.thread_key.channel, first.thread_key.chat_id, first.text) == ("tg", "5", "event opened")
    assert len(intake.events) == 3  # the delivery, its redelivery, the GitLab one


async def test_a_route_over_its_rate_is_answered_429_and_stores_nothing(served) -> None:
    url, intake = served
    auth = {"Authorization": f"Bearer {SECRET}"}
    answers = [await _post(f"{url}/hooks/bearer", json.dumps({"n": n}).encode(), auth) for n in range(3)]
    assert answers == [(202, "accepted"), (202, "accepted"), (429, "rate limited")]
    assert len(intake.events) == 2
    # the same body twice has one delivery id (its hash) when the sender gives none
    assert intake.events[0].event_id != intake.events[1].event_id


def test_the_template_fills_dotted_keys_and_runs_nothing() -> None:
    payload = {"repo": {"name": "rocket"}, "commits": [{"id": "c1"}], "n": 3, "obj": {"a": [1]}}
    template = "{repo.name} {commits.0.id} {n} {obj} {{literal}} {missing.key} {commits.9.id} {__class__}"
    assert fill_prompt(template, payload) == (
        'rocket c1 3 {"a": [1]} {literal} (missing missing.key) (missing commits.9.id) (missing __class__)'
    )
    assert fill_prompt("{repo.name.__class__.__init__}", payload) == "(missing repo.name.__class__.__init__)"
    assert len(fill_prompt("{big}", {"big": "x" * 10_000})) < 2100


@pytest.mark.parametrize(
    ("route", "says"),
    [
        ({"secret": "short"}, "at least 16"),
        ({"path": "/metrics"}, "path"),
        ({"auth": "hmac"}, "auth"),
        ({"per_minute": 0}, "per_minute"),
    ],
)
def test_invalid_routes_name_the_key(route: dict, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        _route("github", **route)
