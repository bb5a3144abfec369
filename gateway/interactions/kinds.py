"""The kinds of interaction: a question (``ask_question``), a plan (``exit_plan_mode``) and an
approval (a gated tool call): the prompt each shows and how each reads its answers."""

from __future__ import annotations

from typing import Any

from connectors.interactive import Prompt, PromptOption
from gateway.interactions.questions import (
    answer_from_options,
    answer_from_text,
    answer_summary,
    question_prompt,
)
from gateway.interactions.service import Asked, Reading

__all__ = ["READINGS", "asked_for"]

APPROVE, DENY, ALWAYS = "ok", "no", "always"
_REVISE = "more"
_YES_WORDS = frozenset({"approve", "approved", "yes", "y", "ok", "go", "go ahead", "1"})
_NO_WORDS = ("deny", "denied", "no", "reject", "2")
_ALWAYS_WORDS = frozenset({"always", "always in this thread", "3"})


def asked_for(kind: str, spec: dict[str, Any], answerers: tuple[str, ...] | None, timeout: float) -> Asked:
    return Asked(kind, spec, lambda prompt_id: prompt_for(kind, prompt_id, spec), answerers, timeout)


def prompt_for(kind: str, prompt_id: str, spec: dict[str, Any]) -> Prompt:
    if kind == "question":
        return question_prompt(prompt_id, spec, None)
    if kind == "plan":
        return Prompt(
            prompt_id,
            f"{spec['title']}\n\n{spec['plan']}",
            (PromptOption(APPROVE, "Approve", "primary"), PromptOption(_REVISE, "Keep planning")),
            hint="Reply 'approve', or with what to change.",
        )
    return Prompt(
        prompt_id,
        str(spec["title"]),
        (
            PromptOption(APPROVE, "Approve", "primary"),
            PromptOption(DENY, "Deny", "danger"),
            PromptOption(ALWAYS, "Always in this thread"),
        ),
        hint="Reply 'approve', 'deny' (optionally with a reason: 'deny: not now') or 'always'.",
    )


def _plan_options(spec: dict[str, Any], values: tuple[str, ...]) -> dict[str, Any] | None:
    if values == (APPROVE,):
        return {"action": "approve"}
    if values == (_REVISE,):
        return {"action": "revise", "feedback": ""}
    return None


def _plan_text(spec: dict[str, Any], text: str) -> tuple[dict[str, Any] | None, str | None]:
    reply = text.strip()
    if not reply:
        return None, "Reply 'approve', or with what to change."
    if reply.lower().rstrip(".!") in _YES_WORDS:
        return {"action": "approve"}, None
    return {"action": "revise", "feedback": reply[:4000]}, None


def _plan_summary(answer: dict[str, Any] | None) -> str:
    if not answer:
        return "no answer"
    return "approved" if answer.get("action") == "approve" else "keep planning"


def _approval_options(spec: dict[str, Any], values: tuple[str, ...]) -> dict[str, Any] | None:
    decision = {(APPROVE,): "approve", (DENY,): "deny", (ALWAYS,): "always"}.get(values)
    return {"decision": decision} if decision else None


def _approval_text(spec: dict[str, Any], text: str) -> tuple[dict[str, Any] | None, str | None]:
    reply = text.strip()
    word = reply.lower().rstrip(".!")
    if word in _YES_WORDS:
        return {"decision": "approve"}, None
    if word in _ALWAYS_WORDS:
        return {"decision": "always"}, None
    for no in _NO_WORDS:
        if word == no or word.startswith((no + ":", no + " ", no + ",")):
            reason = reply[len(no) :].lstrip(":, ").strip()
            return {"decision": "deny", **({"reason": reason[:500]} if reason else {})}, None
    return None, "Reply 'approve', 'deny' (optionally with a reason: 'deny: not now') or 'always'."


def _approval_summary(answer: dict[str, Any] | None) -> str:
    decision = (answer or {}).get("decision")
    words = {"approve": "approved", "deny": "denied", "always": "approved for this thread"}
    text = words.get(str(decision), "no answer")
    reason = (answer or {}).get("reason")
    return f"{text}: {reason}" if reason else text


READINGS: dict[str, Reading] = {
    "question": Reading(
        answer_from_options,
        answer_from_text,
        answer_summary,
        lambda prompt_id, spec: prompt_for("question", prompt_id, spec),
    ),
    "plan": Reading(_plan_options, _plan_text, _plan_summary),
    "approval": Reading(_approval_options, _approval_text, _approval_summary),
}
