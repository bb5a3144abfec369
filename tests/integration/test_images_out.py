"""Pictures out through real turns: the fake model calls image_generate, the images stand-in
answers with a PNG, and the picture lands in the thread's workspace and in the chat exactly
once on each platform; image_edit sends the user's photo as its reference; the caps, the
unattended rule and the label refuse with what to do."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.daemon import Gateway
from tests.fakes.images_api import FakeImagesAPI
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.fakes.png_maker import make_png
from tests.harness import provider_for, running_gateway, say, tool_results, write_config
from tests.integration.test_pictures_in import CHANNEL, WAIT, _channel, _platform, _send_picture

LABELS = ["image.generate"]


def _script(calls: list[Call]) -> Any:
    def respond(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if len(results) < len(calls):
            return Reply(tool_calls=[calls[len(results)]])
        return Reply(text=json.dumps(results))

    return respond


def _config(
    root: Path,
    model: FakeAnthropic,
    images: FakeImagesAPI,
    *,
    channel: dict[str, Any] | None = None,
    persona: dict[str, Any] | None = None,
    caps: dict[str, Any] | None = None,
) -> Path:
    extra: dict[str, Any] = {
        "images": {"provider": "pictures", "model": "gpt-image-1", **(caps or {})},
    }
    if channel is not None:
        extra["channels"] = [channel]
        extra["bindings"] = [{"channel": CHANNEL, "persona": "assistant"}]
    config = write_config(
        root,
        provider=provider_for(model),
        extra=extra,
        personas={"assistant": {"capabilities": LABELS, **(persona or {})}},
    )
    # A second provider: the images endpoint, OpenAI-compatible.
    data = yaml.safe_load(config.read_text())
    data["providers"]["pictures"] = {"type": "openai", "base_url": images.base_url, "api_key": images.api_key}
    config.write_text(yaml.safe_dump(data))
    return config


def _uploaded(platform: str, fake: Any) -> list[tuple[str, str]]:
    """(name, sha256) of every file the bot posted."""
    if platform == "telegram":
        return [(f.name or "", f.sha256) for f in fake.files_received(4242)]
    if platform == "slack":
        return [(f.name, f.sha256) for f in fake.shared_files]
    return [(f["filename"], f["sha256"]) for m in fake.sent(fake.channel_id) for f in m.get("files", [])]


async def _wait_uploaded(platform: str, fake: Any, n: int, gw: Gateway) -> None:
    await gw.components.outbox.flush(10)
    for _ in range(200):
        if len(_uploaded(platform, fake)) >= n:
            return
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_image_generate_posts_the_picture_once_and_saves_it(platform: str, tmp_path: Path) -> None:
    calls = [
        Call("image_generate", {"prompt": "a lighthouse at dusk", "size": "1024x1536", "quality": "low"})
    ]
    async with (
        _platform(platform) as fake,
        FakeImagesAPI() as images,
        FakeAnthropic(responder=_script(calls)) as model,
    ):
        config = _config(tmp_path, model, images, channel={"name": CHANNEL, **_channel(platform, fake)})
        async with running_gateway(config) as gw:
            await _send_picture(platform, fake, "draw a lighthouse", make_png(2, 2))
            await _wait_uploaded(platform, fake, 1, gw)
            await gw.components.outbox.flush(10)
            uploaded = _uploaded(platform, fake)
    [(failed, text)] = tool_results(model.requests[-1])
    assert not failed, text
    result = json.loads(text)
    assert result["posted"] is True and result["format"] == "png" and result["size"] == "1024x1536"
    saved = (
        tmp_path
        / "data"
        / "workspaces"
        / "assistant"
        / "threads"
        / "1"
        / result["path"].removeprefix("/workspace/")
    )
    data = saved.read_bytes()
    assert data.startswith(b"\x89PNG") and result["path"].startswith("/workspace/generated-images/")
    assert uploaded == [(saved.name, hashlib.sha256(data).hexdigest())]  # exactly once
    (request,) = images.requests
    assert request["endpoint"] == "generations" and request["auth"] == f"Bearer {images.api_key}"
    assert (request["prompt"], request["model"], request["size"], request["quality"]) == (
        "a lighthouse at dusk",
        "gpt-image-1",
        "1024x1536",
        "low",
    )


@asynccontextmanager
async def _console(
    tmp_path: Path, calls: list[Call], **kwargs: Any
) -> AsyncIterator[tuple[Gateway, FakeAnthropic, FakeImagesAPI]]:
    async with (
        FakeImagesAPI(form=kwargs.pop("form", "b64_json")) as images,
        FakeAnthropic(responder=_script(calls)) as model,
    ):
        async with running_gateway(_config(tmp_path, model, images, **kwargs)) as gw:
            yield gw, model, images


async def test_image_edit_sends_the_users_photo_and_the_url_form_is_fetched(tmp_path: Path) -> None:
    photo = make_png(5, 5)
    calls = [
        Call("image_edit", {"prompt": "make it blue", "image_paths": ["/workspace/inbox/1/photo.png"]}),
        Call("image_edit", {"prompt": "x", "image_paths": ["/workspace/inbox/1/missing.png"]}),
        Call("image_edit", {"prompt": "x", "image_paths": []}),
    ]
    async with _console(tmp_path, calls, form="url") as (gw, model, images):
        folder = tmp_path / "data" / "workspaces" / "assistant" / "threads" / "1" / "inbox" / "1"
        folder.mkdir(parents=True)
        (folder / "photo.png").write_bytes(photo)
        await say(gw, "edit my photo", timeout=WAIT)
    edited, missing, empty = tool_results(model.requests[-1])
    assert not edited[0], edited[1]
    result = json.loads(edited[1])
    assert result["path"].startswith("/workspace/generated-images/edited-") and result["references"] == 1
    (request,) = images.requests
    assert request["endpoint"] == "edits" and request["prompt"] == "make it blue"
    assert request["images"] == [{"name": "photo.png", "size": len(photo)}]
    assert missing[0] and "does not exist" in missing[1]
    assert empty[0] and "image_paths needs at least 1 items" in empty[1]


async def test_the_thread_cap_the_day_cap_and_a_failing_endpoint_refuse_with_what_to_do(
    tmp_path: Path,
) -> None:
    calls = [Call("image_generate", {"prompt": f"picture {i}"}) for i in range(3)]
    calls.append(Call("image_generate", {"prompt": "p", "size": "999x999"}))
    async with _console(tmp_path, calls, caps={"per_thread": 2}) as (gw, model, images):
        await say(gw, "three pictures", timeout=WAIT)
        results = tool_results(model.requests[-1])
        assert [failed for failed, _ in results[:2]] == [False, False]
        assert (
            results[2][0]
            and "has made 2 images in this conversation, its limit (images.per_thread" in results[2][1]
        )
        assert results[3][0] and "size must be one of 1024x1024, 1024x1536, 1536x1024, auto" in results[3][1]
    assert len(images.requests) == 2
    day = [Call("image_generate", {"prompt": p}) for p in ("one", "two", "three")]
    (tmp_path / "b").mkdir()
    async with _console(tmp_path / "b", day, caps={"per_day": 1}) as (gw, model, images):
        images.fail_next(3, status=500)
        await say(gw, "again", timeout=WAIT)
        failed, made, capped = tool_results(model.requests[-1])
    assert failed[0] and "the images endpoint failed (500" in failed[1]
    assert not made[0], made[1]  # a failed call is not counted against the day
    assert capped[0] and "the daily limit (images.per_day in talon.yaml)" in capped[1]
    assert len(images.requests) == 4  # the first call with the client's two retries, then the second


@pytest.mark.parametrize("unattended", [False, True])
async def test_a_scheduled_turn_is_refused_unless_the_persona_opts_in(
    unattended: bool, tmp_path: Path
) -> None:
    soon = datetime.fromtimestamp(time.time() + 1, UTC).isoformat(timespec="seconds")

    def respond(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if "[scheduled task «Chart»]" in last_user_text(body):
            if not results:
                return Reply(tool_calls=[Call("image_generate", {"prompt": "nightly chart"})])
            return Reply(text="scheduled: " + json.dumps(results))
        if not results:
            return Reply(
                tool_calls=[Call("create_schedule", {"name": "Chart", "command": "Draw", "runAt": soon})]
            )
        return Reply(text="scheduled it")

    async with FakeImagesAPI() as images, FakeAnthropic(responder=respond) as model:
        persona = {"capabilities": [*LABELS, "schedule.manage:own"], "images": {"unattended": unattended}}
        async with running_gateway(_config(tmp_path, model, images, persona=persona)) as gw:
            await say(gw, "draw a chart every night", timeout=WAIT)
            async with asyncio.timeout(WAIT):
                while not any(
                    last_user_text(b).startswith("[scheduled") and tool_results(b) for b in model.requests
                ):
                    await asyncio.sleep(0.05)
    [(failed, text)] = tool_results(model.requests[-1])
    if unattended:
        assert not failed and json.loads(text)["path"].startswith("/workspace/generated-images/")
        assert len(images.requests) == 1
    else:
        assert failed and "unless the persona allows it: images.unattended: true in persona.yaml" in text
        assert images.requests == []


async def test_without_the_label_the_tools_are_not_offered_and_a_direct_call_is_refused(
    tmp_path: Path,
) -> None:
    async with FakeImagesAPI() as images, FakeAnthropic(responder=lambda body: Reply(text="ok")) as model:
        async with running_gateway(
            _config(tmp_path, model, images, persona={"capabilities": ["fs.read:thread"]})
        ) as gw:
            await say(gw, "hi", timeout=WAIT)
            offered = {t["name"] for t in model.requests[0]["tools"]}
            bridge = gw.components.host_tools.bridge
            identity = bridge.register(999, 1, "assistant", ttl=30)
            refused = await bridge.call(identity, "image_generate", {"prompt": "a cat"})
    assert not {"image_generate", "image_edit"} & offered
    assert refused.is_error and "image.generate" in refused.content
    assert images.requests == []


async def test_an_answer_that_is_not_an_image_is_refused_and_nothing_is_saved_or_posted(
    tmp_path: Path,
) -> None:
    calls = [Call("image_generate", {"prompt": "a cat"})]
    async with _console(tmp_path, calls, form="junk") as (gw, model, _):
        await say(gw, "draw", timeout=WAIT)
    [(failed, text)] = tool_results(model.requests[-1])
    assert failed and "answered with something that is not a PNG, JPEG, GIF or WebP image" in text
    workspace = tmp_path / "data" / "workspaces" / "assistant" / "threads"
    assert not list(workspace.glob("*/generated-images/*"))


async def test_the_picture_goes_to_the_forum_topic_it_was_asked_in(tmp_path: Path) -> None:
    calls = [Call("image_generate", {"prompt": "a map"})]
    chat, topic = -100555, 77
    async with (
        _platform("telegram") as telegram,
        FakeImagesAPI() as images,
        FakeAnthropic(responder=_script(calls)) as model,
    ):
        config = _config(tmp_path, model, images, channel={"name": CHANNEL, **_channel("telegram", telegram)})
        async with running_gateway(config) as gw:
            telegram.inject_message(
                chat,
                "@talon_test_bot draw a map",
                user_id=4242,
                chat_type="supergroup",
                message_thread_id=topic,
            )
            await telegram.wait_for_sent(chat, 2, timeout=WAIT)
            await gw.components.outbox.flush(10)
            sent = telegram.sent_messages(chat)
    assert len(telegram.files_received(chat)) == 1
    assert [m.message_thread_id for m in sent] == [topic, topic], sent  # the picture, then the reply
