"""What image_generate and image_edit share: their arguments, the caps, saving and posting.

A call is refused before anything is paid for when images are not configured, when the run
has no person in the chat (a schedule, a background job, a child agent, an ad-hoc session)
and the persona did not opt in (``images.unattended: true`` in persona.yaml), or when the
thread's count of that kind (``images.per_thread``) or the day's count across all threads
(``images.per_day``, UTC) is reached. The picture is saved in the thread's ``/workspace``
(``output_path``, by default ``/workspace/generated-images/<id>.<format>``) and posted to the
chat through the outbox, as channel_send posts a file.

A turn retried after a crash makes the same call again; the image its interrupted attempt
made for the same thread and arguments is reused (not paid for, and not posted again if it
was) instead of making another.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from gateway.config import ProviderSettings, Settings
from gateway.image_format import KINDS, sniff
from gateway.image_settings import ImageSettings
from gateway.outbox_spool import FileSource
from gateway.store.images import MadeImage, image_counts, mark_posted, record_image, reusable_image
from gateway.store.threads import get_thread
from gateway.workspaces import WORKSPACE, thread_workspace
from tools.base import ToolContext, ToolError
from tools.images.endpoint import Picture
from tools.workspace.atomic import write_atomic
from tools.workspace.roots import Root, WorkspaceRoots, open_regular

__all__ = [
    "FORMATS",
    "MAX_PROMPT_CHARS",
    "QUALITIES",
    "SIZES",
    "Call",
    "common_schema",
    "deliver",
    "images_configured",
    "open_reference",
    "prepare",
    "reused",
]

SIZES = ("1024x1024", "1024x1536", "1536x1024", "auto")
QUALITIES = ("low", "medium", "high", "auto")
FORMATS = ("png", "webp", "jpeg")
MAX_PROMPT_CHARS = 32_000
_EXTENSION = {"png": "png", "webp": "webp", "jpeg": "jpg"}
_KIND_NAMES = {"generate": "image_generate", "edit": "image_edit"}


@dataclass(frozen=True, slots=True)
class Call:
    """A checked call: the endpoint's parameters and where the result goes."""

    kind: str  # generate | edit
    provider: ProviderSettings
    settings: ImageSettings
    params: dict[str, Any]
    output_path: str | None
    request_key: str


def common_schema(default_name: str) -> dict[str, Any]:
    return {
        "prompt": {"type": "string", "minLength": 1, "maxLength": MAX_PROMPT_CHARS},
        "model": {
            "type": "string",
            "description": "gpt-image-1 (default: images.model in talon.yaml) or another of images.models",
        },
        "size": {
            "type": "string",
            "enum": list(SIZES),
            "description": "1024x1024 (default), 1024x1536, 1536x1024 or auto",
        },
        "quality": {
            "type": "string",
            "enum": list(QUALITIES),
            "description": "low, medium, high or auto (default); higher costs more",
        },
        "output_format": {
            "type": "string",
            "enum": list(FORMATS),
            "description": "png (default), webp or jpeg",
        },
        "output_path": {
            "type": "string",
            "description": f"where to save it in /workspace; default /workspace/generated-images/{default_name}.<format>",
        },
    }


def images_configured(settings: Settings) -> bool:
    """Whether ``images.provider`` names a provider (the tools are not offered otherwise)."""
    return settings.images.provider is not None and settings.images.provider in settings.providers


def _configured(ctx: ToolContext, tool: str) -> tuple[ProviderSettings, ImageSettings]:
    settings = ctx.settings.images
    provider = ctx.settings.providers.get(settings.provider or "")
    if provider is None or provider.type != "openai":
        raise ToolError(
            f"{tool} is not configured on this Talon: the operator sets images: {{provider: <an openai-type "
            "provider>, model: gpt-image-1}} in talon.yaml"
        )
    return provider, settings


def _choice(args: dict[str, Any], name: str, allowed: tuple[str, ...] | list[str], default: str) -> str:
    value = args.get(name, default)
    if value not in allowed:
        raise ToolError(
            f"{name} {value!r} is not one of {', '.join(allowed)}; send one of those or leave it out"
        )
    return str(value)


async def prepare(ctx: ToolContext, kind: str, args: dict[str, Any], extra_key: Any = None) -> Call:
    """Check the arguments, the opt-in and the caps; raises :class:`ToolError` saying what to do."""
    tool = _KIND_NAMES[kind]
    provider, settings = _configured(ctx, tool)
    if not ctx.interactive and not ctx.persona.images_unattended:
        raise ToolError(
            f"{tool} makes paid calls and does not run without a person in the chat (a schedule, a background "
            "job, a child agent or an ad-hoc session) unless the persona allows it: images.unattended: true in "
            "persona.yaml. Describe the picture in words instead"
        )
    prompt = args.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ToolError("prompt must be a non-empty description of the picture")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ToolError(
            f"prompt is {len(prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}: shorten it"
        )
    params = {
        "prompt": prompt,
        "model": _choice(args, "model", settings.models, settings.model),
        "size": _choice(args, "size", SIZES, "1024x1024"),
        "quality": _choice(args, "quality", QUALITIES, "auto"),
        "output_format": _choice(args, "output_format", FORMATS, "png"),
        "n": 1,
    }
    output_path = args.get("output_path")
    if output_path is not None and (not isinstance(output_path, str) or not output_path.strip()):
        raise ToolError("output_path must be a path in /workspace such as /workspace/logo.png, or left out")
    key = hashlib.sha256(
        json.dumps([kind, params, output_path, extra_key], sort_keys=True).encode()
    ).hexdigest()
    await _check_caps(ctx, kind, tool, settings)
    return Call(kind, provider, settings, params, output_path, key)


async def _check_caps(ctx: ToolContext, kind: str, tool: str, settings: ImageSettings) -> None:
    day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    counts = await ctx.db.read(image_counts, ctx.thread_id, kind, day)
    if counts.thread >= settings.per_thread:
        raise ToolError(
            f"{tool} has made {counts.thread} images in this conversation, its limit (images.per_thread in "
            "talon.yaml); reuse one of them, or ask the operator to raise the limit"
        )
    if counts.day >= settings.per_day:
        raise ToolError(
            f"this Talon has made {counts.day} images today (UTC), the daily limit (images.per_day in talon.yaml); "
            "try again tomorrow"
        )


async def reused(ctx: ToolContext, call: Call) -> dict[str, Any] | None:
    """The result of the same request an interrupted attempt of this turn already made, posting
    it if that attempt did not get so far; None when there is none."""
    made = await ctx.db.read(reusable_image, ctx.thread_id, call.request_key, ctx.run_id)
    if made is None:
        return None
    host = _host_path(ctx, made.path)
    if not host.is_file():
        return None
    return await _post_and_record(ctx, made, host, call, reused=True)


async def deliver(ctx: ToolContext, call: Call, picture: Picture) -> dict[str, Any]:
    """Save ``picture``, record it and post it to the chat; the tool's result."""
    kind = sniff(picture.data[:16])
    if kind is None or kind not in KINDS:
        raise ToolError(
            "the images endpoint answered with something that is not a PNG, JPEG, GIF or WebP image"
        )
    virtual = await asyncio.to_thread(_save, ctx, _output_path(call, kind), picture.data)
    image_id = await ctx.db.run_transaction(
        lambda conn: record_image(
            conn,
            thread_id=ctx.thread_id,
            run_id=ctx.run_id,
            persona=ctx.persona.name,
            kind=call.kind,
            request_key=call.request_key,
            path=virtual,
            now=time.time(),
        )
    )
    result = await _post_and_record(ctx, MadeImage(image_id, virtual, False), _host_path(ctx, virtual), call)
    result.update(bytes=len(picture.data), format=kind)
    if picture.revised_prompt:
        result["revised_prompt"] = picture.revised_prompt
    return result


async def _post_and_record(
    ctx: ToolContext, made: MadeImage, host: Path, call: Call, *, reused: bool = False
) -> dict[str, Any]:
    result: dict[str, Any] = {"path": made.path, "model": call.params["model"], "size": call.params["size"]}
    if made.posted:
        await ctx.db.run_transaction(lambda conn: mark_posted(conn, made.id, ctx.run_id))
        result.update(
            posted=True, note="made by an earlier attempt of this turn and already posted; not made again"
        )
        return result
    result["posted"] = await _post(ctx, host, made.path)
    if result["posted"] is True:
        await ctx.db.run_transaction(lambda conn: mark_posted(conn, made.id, ctx.run_id))
    if reused:
        result["note"] = "made by an earlier attempt of this turn; not made again"
    return result


async def _post(ctx: ToolContext, host: Path, virtual: str) -> bool | str:
    """Post the file to this conversation; True, or why it was not posted."""
    if ctx.services is None:
        return "not posted: no chat in this context; the file is in the workspace"
    thread = await ctx.db.read(get_thread, ctx.thread_id)
    if thread is None:
        return "not posted: the conversation is gone"
    fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        source = FileSource(fd=fd, size=size, name=PurePosixPath(virtual).name, shown=virtual)
        await ctx.services.send_to_channel(
            channel=thread.channel,
            markdown="",
            origin_thread_id=ctx.thread_id,
            persona=ctx.persona.name,
            attachments=[source],  # no chat: the poster picks this conversation, topic included
        )
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return True


def _save(ctx: ToolContext, path: str, data: bytes) -> str:
    """Write ``data`` at ``path`` in the thread's /workspace; returns the path as the model sees it."""
    with _write_roots(ctx).resolved(path, what="output_path", create_parents=True) as resolved:
        write_atomic(resolved, data, what="output_path")
        return resolved.virtual


def _output_path(call: Call, kind: str) -> str:
    if call.output_path:
        return call.output_path
    stem = ("edited-" if call.kind == "edit" else "") + secrets.token_hex(6)
    return f"{WORKSPACE}/generated-images/{stem}.{_EXTENSION.get(kind, kind)}"


def _write_roots(ctx: ToolContext) -> WorkspaceRoots:
    """The thread's /workspace, writable whatever the persona's fs labels (the picture is the
    tool's own output)."""
    host = thread_workspace(ctx.settings, ctx.persona.name, ctx.thread_id)
    host.mkdir(parents=True, exist_ok=True)
    return WorkspaceRoots((Root(WORKSPACE, host.resolve(), True),), "write")


def _host_path(ctx: ToolContext, virtual: str) -> Path:
    relative = PurePosixPath(virtual).relative_to(WORKSPACE)
    return thread_workspace(ctx.settings, ctx.persona.name, ctx.thread_id) / relative


def open_reference(ctx: ToolContext, path: Any, what: str, cap: int) -> tuple[str, bytes]:
    """A reference image of image_edit: a PNG, JPEG or WebP in /workspace (or /shared when the
    persona's fs.read opens it), at most ``cap`` bytes; ``(name, bytes)``."""
    roots = WorkspaceRoots.for_subagent(ctx.settings, ctx.persona, ctx.thread_id)
    with roots.resolved(path, what=what) as resolved:
        fd, st = open_regular(resolved, what=what)
        virtual = resolved.virtual
    try:
        if st.st_size > cap:
            raise ToolError(
                f"{what} {virtual} is {st.st_size:,} bytes; a reference image may be at most {cap:,}"
            )
        data = os.read(fd, cap + 1)
        while len(data) < st.st_size and (chunk := os.read(fd, cap + 1 - len(data))):
            data += chunk
    finally:
        os.close(fd)
    kind = sniff(data[:16])
    if kind not in ("png", "jpeg", "webp"):
        raise ToolError(
            f"{what} {virtual} is not a PNG, JPEG or WebP image (read from its bytes); convert it first"
        )
    return PurePosixPath(virtual).name, data
