"""``model_complete``: send one prompt to a configured model and return its text; no tools.

The model is ``<provider>:<model>`` with a provider of talon.yaml (default: the persona's own
model). An unconfigured provider is an error naming the configured ones, never a fallback.
``input_path`` is a text file in the caller's readable workspace roots (the file tools'
resolution, :class:`tools.workspace.roots.WorkspaceRoots`); its text goes to the model only.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from gateway.runtime.model import ChatMessage, ModelRequest, ProviderError
from tools.base import HostTool, ToolContext, ToolError
from tools.workspace.roots import WorkspaceRoots, open_regular

__all__ = ["MAX_INPUT_BYTES", "TOOL"]

DEFAULT_MAX_TOKENS = 4096
MAX_TOKENS = 32_000
MAX_INPUT_BYTES = 1024 * 1024
MAX_PROMPT_CHARS = 200_000
CALL_TIMEOUT = 170.0


def _model(ctx: ToolContext, value: object) -> tuple[str, str]:
    providers = sorted(ctx.settings.providers)
    if value is None:
        return ctx.persona.provider, ctx.persona.model
    if not isinstance(value, str) or ":" not in value:
        raise ToolError(
            f"model must be '<provider>:<model>' with one of the configured providers ({', '.join(providers)}), "
            f"e.g. {ctx.persona.model_ref!r}; leave it out for your own model"
        )
    provider, _, model = value.partition(":")
    if provider not in ctx.settings.providers or not model.strip():
        raise ToolError(
            f"model {value!r} is not configured: the providers are {', '.join(providers)}; send "
            f"'<provider>:<model>' with one of them, e.g. {ctx.persona.model_ref!r}"
        )
    return provider, model.strip()


def _read_input(roots: WorkspaceRoots, path: object) -> tuple[str, str]:
    with roots.resolved(path, what="input_path") as resolved:
        fd, st = open_regular(resolved, what="input_path")
    try:
        if st.st_size > MAX_INPUT_BYTES:
            raise ToolError(
                f"input_path {resolved.virtual!r} is {st.st_size:,} bytes; send a text file of at most 1 MB"
            )
        raw = os.read(fd, MAX_INPUT_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_INPUT_BYTES:
        raise ToolError(f"input_path {resolved.virtual!r} grew past 1 MB while it was read")
    try:
        return resolved.virtual, raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"input_path {resolved.virtual!r} is not UTF-8 text; send a text file") from None


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    prompt = args.get("prompt") or ""
    path = args.get("input_path")
    if not str(prompt).strip() and path is None:
        raise ToolError("send a prompt (the instruction for the model), an input_path, or both")
    max_tokens = args.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= MAX_TOKENS:
        raise ToolError(
            f"max_tokens must be a whole number from 1 to {MAX_TOKENS} (default {DEFAULT_MAX_TOKENS})"
        )
    provider_name, model = _model(ctx, args.get("model"))
    content = str(prompt)
    if path is not None:
        roots = WorkspaceRoots.for_call(ctx, "read")
        shown, text = await asyncio.to_thread(_read_input, roots, path)
        content = f"{content}\n\n<file path={shown!r}>\n{text}\n</file>" if content.strip() else text
    services = ctx.require_services("model_complete needs the running daemon's model providers")
    provider = services.subagents.providers.get(provider_name)
    if provider is None:
        raise ToolError(f"the provider {provider_name!r} is not running in this gateway")
    request = ModelRequest(
        model, str(args.get("system") or ""), (ChatMessage("user", content),), (), max_tokens, CALL_TIMEOUT
    )
    try:
        response = await provider.complete(request)
    except ProviderError as exc:
        raise ToolError(f"{provider_name}:{model} failed: {exc}") from None
    return {
        "text": response.text,
        "model": f"{provider_name}:{model}",
        "stop_reason": response.stop_reason,
        "usage": {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens},
    }


TOOL = HostTool(
    mcp_name="model_complete",
    internal_name="model.complete",
    prefix="model.complete",
    description=(
        "Send one prompt to a configured model and get its text reply: no tools, no conversation. Use it for "
        "bounded text work (summarize, classify, extract, rewrite, a second opinion) on a cheaper or other "
        "model; use agent when the work needs tools. model is '<provider>:<model>' with a provider of this "
        "gateway's talon.yaml (default: your own model); an unconfigured one is an error, never a fallback. "
        "input_path: a text file (at most 1 MB) in your workspace whose text is sent to the model and not "
        "shown to you."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "maxLength": MAX_PROMPT_CHARS,
                "description": "Instruction for the model.",
            },
            "system": {
                "type": "string",
                "maxLength": MAX_PROMPT_CHARS,
                "description": "Optional system prompt.",
            },
            "model": {"type": "string", "maxLength": 200, "description": "'<provider>:<model>'."},
            "max_tokens": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TOKENS,
                "description": f"Output token cap (default {DEFAULT_MAX_TOKENS}).",
            },
            "input_path": {
                "type": "string",
                "maxLength": 4096,
                "description": "A text file under /workspace or /shared, appended to the prompt.",
            },
        },
        "additionalProperties": False,
    },
    handler=handle,
    timeout=CALL_TIMEOUT + 10,
)
