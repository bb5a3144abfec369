"""``ask_question``: ask the chat a question and wait for the answer (model-tools reference,
adapted: the answer comes from the chat's humans by tap or reply, ``timeout_seconds`` bounds the
wait, and who may answer is the persona's ``answerers``)."""

from __future__ import annotations

from typing import Any

from gateway.interactions.questions import (
    MAX_CHOICE_CHARS,
    MAX_CHOICES,
    MAX_CONTEXT_CHARS,
    MAX_QUESTION_CHARS,
    check_question,
)
from tools.ask.common import DEFAULT_TIMEOUT, MAX_TIMEOUT, ask_humans
from tools.base import HostTool, ToolContext

__all__ = ["TOOL"]


async def ask_question(ctx: ToolContext, args: dict[str, Any]) -> Any:
    spec = check_question(args)
    return await ask_humans(ctx, "question", spec, args.get("timeout_seconds"))


_SCALAR = {"type": ["string", "number", "boolean"]}

TOOL = HostTool(
    mcp_name="ask_question",
    internal_name="chat.ask_question",
    prefix="chat.ask",
    description=(
        "Ask the people in this chat a question and wait for the answer. A last resort: use your "
        "tools first. Shown with buttons (yes/no, choices) where the platform has them, else as "
        "numbered choices answered by reply. Returns {action: 'answer', content: {value}} (a typed "
        "answer to a choice: content.custom_value with value null), {action: 'skip'}, "
        "{action: 'timeout'} when nobody answered in time, or {action: 'decline'} at once where no "
        "human can answer (schedules, background jobs, child agents)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
            "type": {
                "type": "string",
                "enum": ["text", "confirm", "choice", "multi_choice", "number"],
                "description": "text (default), confirm (yes/no), choice, multi_choice or number",
            },
            "choices": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_CHOICE_CHARS},
                "maxItems": MAX_CHOICES,
                "description": "the options, required for choice and multi_choice",
            },
            "context": {
                "type": "string",
                "maxLength": MAX_CONTEXT_CHARS,
                "description": "background shown above the question",
            },
            "default": {**_SCALAR, "description": "a default shown as a hint"},
            "allow_skip": {"type": "boolean", "description": "the person may skip; default false"},
            "allow_custom": {
                "type": "boolean",
                "description": "(choice, multi_choice) the person may type an answer of their own",
            },
            "min_length": {"type": "integer", "minimum": 0, "maximum": 4000},
            "max_length": {"type": "integer", "minimum": 1, "maximum": 4000},
            "min": {"type": "number"},
            "max": {"type": "number"},
            "timeout_seconds": {
                "type": "number",
                "minimum": 10,
                "maximum": MAX_TIMEOUT,
                "description": f"how long to wait for the answer; default {DEFAULT_TIMEOUT:g}",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    },
    handler=ask_question,
    timeout=MAX_TIMEOUT + 60,
    offered_to="roots",
    waits_for_human=True,
)
