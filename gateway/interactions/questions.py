"""What ``ask_question`` asks: its arguments checked into a spec, the prompt it shows, and the
answer read from a tap or a reply.

A spec is plain JSON (it is stored with the pending interaction). Option ids are short:
``1``..``n`` for choices, ``y``/``n`` for confirm, ``skip`` for skipping. Answers are the
tool's results: ``{"action": "answer", "content": {"value": ...}}`` (a custom answer:
``{"value": null, "custom_value": "..."}``), ``{"action": "skip"}``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from connectors.interactive import Prompt, PromptOption
from gateway.errors import RefusedError

__all__ = [
    "MAX_CHOICES",
    "MAX_CHOICE_CHARS",
    "MAX_QUESTION_CHARS",
    "QuestionError",
    "answer_from_options",
    "answer_from_text",
    "check_question",
    "question_prompt",
]

MAX_QUESTION_CHARS = 1000
MAX_CONTEXT_CHARS = 1000
MAX_CHOICES = 25  # Discord's select menu holds 25
MAX_CHOICE_CHARS = 75  # Slack's button text limit
MAX_REPLY_CHARS = 4000
TYPES = ("text", "confirm", "choice", "multi_choice", "number")
SKIP = "skip"
_YES = frozenset({"y", "yes", "true", "ok", "sure", "1"})
_NO = frozenset({"n", "no", "false", "nope", "2"})
_NUMBERS = re.compile(r"\d+")


class QuestionError(RefusedError):
    """The question's arguments do not make a question; the message says what to send instead."""


def check_question(args: dict[str, Any]) -> dict[str, Any]:
    """The spec of a valid ``ask_question`` call (the schema already checked the shapes)."""
    kind = args.get("type") or "text"
    question = str(args["question"]).strip()
    if not question:
        raise QuestionError("question is empty; send the question to ask")
    choices = [str(c).strip() for c in args.get("choices") or []]
    if kind in ("choice", "multi_choice"):
        if len(choices) < 2:
            raise QuestionError(f"type {kind} needs choices: a list of 2 to {MAX_CHOICES} options")
        if any(not c for c in choices) or len(set(choices)) != len(choices):
            raise QuestionError("choices must be distinct and non-empty")
    elif choices:
        raise QuestionError(f"choices are only for type choice or multi_choice, not {kind}")
    if args.get("allow_custom") and kind not in ("choice", "multi_choice"):
        raise QuestionError("allow_custom is only for type choice or multi_choice")
    lo, hi = args.get("min"), args.get("max")
    if lo is not None and hi is not None and lo > hi:
        raise QuestionError("min is greater than max; send min <= max")
    lo_len, hi_len = args.get("min_length"), args.get("max_length")
    if lo_len is not None and hi_len is not None and lo_len > hi_len:
        raise QuestionError("min_length is greater than max_length; send min_length <= max_length")
    spec: dict[str, Any] = {"question": question, "type": kind}
    for key in ("context", "default", "min_length", "max_length", "min", "max"):
        if args.get(key) is not None:
            spec[key] = args[key]
    if choices:
        spec["choices"] = choices
    spec["allow_skip"] = bool(args.get("allow_skip"))
    spec["allow_custom"] = bool(args.get("allow_custom"))
    return spec


def question_prompt(prompt_id: str, spec: dict[str, Any], asker: str | None) -> Prompt:
    """The prompt to show; ``asker`` names who may answer when only they may."""
    kind = spec["type"]
    parts = [str(spec["context"]), ""] if spec.get("context") else []
    parts.append(f"❓ {spec['question']}")
    if spec.get("default") is not None:
        parts.append(f"(default: {_shown(spec['default'])})")
    options: list[PromptOption] = []
    if kind == "confirm":
        options = [PromptOption("y", "Yes", "primary"), PromptOption("n", "No")]
    elif kind in ("choice", "multi_choice"):
        options = [PromptOption(str(i), c) for i, c in enumerate(spec["choices"], 1)]
    if spec.get("allow_skip"):
        options.append(PromptOption(SKIP, "Skip"))
    hints = {
        "text": "Reply with your answer.",
        "number": "Reply with a number" + _range(spec) + ".",
        "multi_choice": "Reply with the numbers of your choices, e.g. 1, 3.",
    }
    hint = hints.get(kind, "Reply with the number of your choice." if options else None)
    if spec.get("allow_custom"):
        hint = (hint or "") + " Or type your own answer."
    if spec.get("allow_skip"):
        hint = (hint or "") + " Reply 'skip' to skip."
    if asker:
        hint = (hint or "") + f" (for {asker})"
    return Prompt(prompt_id, "\n".join(parts), tuple(options), multi=kind == "multi_choice", hint=hint)


def answer_from_options(spec: dict[str, Any], values: tuple[str, ...]) -> dict[str, Any] | None:
    """The answer a tap on these option ids gives; None when they are not options of the spec."""
    kind = spec["type"]
    if values == (SKIP,) and spec.get("allow_skip"):
        return {"action": SKIP}
    if kind == "confirm" and values in (("y",), ("n",)):
        return _answer(values == ("y",))
    choices: list[str] = spec.get("choices") or []
    try:
        picked = [choices[int(v) - 1] for v in values if v.isdigit() and 0 < int(v) <= len(choices)]
    except (ValueError, IndexError):
        return None
    if len(picked) != len(values) or not picked:
        return None
    if kind == "choice" and len(picked) == 1:
        return _answer(picked[0])
    if kind == "multi_choice":
        return _answer(list(dict.fromkeys(picked)))
    return None


def answer_from_text(spec: dict[str, Any], text: str) -> tuple[dict[str, Any] | None, str | None]:
    """``(answer, None)`` for a reply that answers the question, else ``(None, what to reply instead)``."""
    reply = text.strip()
    kind = spec["type"]
    if not reply:
        return None, "Reply with your answer."
    if len(reply) > MAX_REPLY_CHARS:
        return None, f"That answer is too long; reply with at most {MAX_REPLY_CHARS} characters."
    if reply.lower() == SKIP and spec.get("allow_skip"):
        return {"action": SKIP}, None
    if kind == "text":
        lo, hi = spec.get("min_length"), spec.get("max_length")
        if lo is not None and len(reply) < lo:
            return None, f"Please reply with at least {lo} characters."
        if hi is not None and len(reply) > hi:
            return None, f"Please reply with at most {hi} characters."
        return _answer(reply), None
    if kind == "number":
        return _number(spec, reply)
    if kind == "confirm":
        word = reply.lower().rstrip(".!")
        if word in _YES or word in _NO:
            return _answer(word in _YES), None
        return None, "Please reply yes or no."
    return _choice_text(spec, reply)


def _choice_text(spec: dict[str, Any], reply: str) -> tuple[dict[str, Any] | None, str | None]:
    choices: list[str] = spec["choices"]
    by_label = {c.lower(): str(i) for i, c in enumerate(choices, 1)}
    if reply.lower() in by_label:
        return answer_from_options(spec, (by_label[reply.lower()],)), None
    numbers = _NUMBERS.findall(reply)
    only_numbers = numbers and not re.sub(r"[\d\s,;.]+|and", "", reply.lower()).strip()
    if only_numbers and (spec["type"] == "multi_choice" or len(numbers) == 1):
        answer = answer_from_options(spec, tuple(numbers))
        if answer is not None:
            return answer, None
    if spec.get("allow_custom"):
        return {"action": "answer", "content": {"value": None, "custom_value": reply}}, None
    many = spec["type"] == "multi_choice"
    return (
        None,
        f"Please reply with {'the numbers' if many else 'the number'} of a choice, 1 to {len(choices)}.",
    )


def _number(spec: dict[str, Any], reply: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        value = float(reply.replace(",", "")) if not reply.lstrip("-").isdigit() else int(reply)
    except ValueError:
        return None, "Please reply with a number" + _range(spec) + "."
    if isinstance(value, float) and not math.isfinite(value):
        return None, "Please reply with a finite number."
    lo, hi = spec.get("min"), spec.get("max")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        return None, "Please reply with a number" + _range(spec) + "."
    return _answer(value), None


def _range(spec: dict[str, Any]) -> str:
    lo, hi = spec.get("min"), spec.get("max")
    if lo is not None and hi is not None:
        return f" from {_shown(lo)} to {_shown(hi)}"
    if lo is not None:
        return f" of at least {_shown(lo)}"
    if hi is not None:
        return f" of at most {_shown(hi)}"
    return ""


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _answer(value: Any) -> dict[str, Any]:
    return {"action": "answer", "content": {"value": value}}


def answer_summary(answer: dict[str, Any] | None) -> str:
    """The answer in a few words, for the closed prompt."""
    if answer is None:
        return "no answer"
    action = answer.get("action")
    if action != "answer":
        return {"skip": "skipped", "decline": "declined"}.get(str(action), str(action))
    content = answer.get("content") or {}
    value = content.get("custom_value") if content.get("value") is None else content.get("value")
    if isinstance(value, list):
        return ", ".join(_shown(v) for v in value)
    text = _shown(value)
    return text if len(text) <= 200 else text[:199] + "…"
