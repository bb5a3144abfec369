"""Block Kit prompts on Slack: a section with buttons (a static select for many options, a
multi-select for several at once), and the ``block_actions`` a tap sends.

Each element's ``action_id`` is ``t:<prompt id>:<option id>`` (a select's ``t:<prompt id>:_``,
its option values option ids; :mod:`connectors.interactive`). Bolt dispatches ``block_actions``
from Socket Mode ``interactive`` envelopes and from signed ``payload=`` form posts alike; the
tap is committed through intake before Bolt acknowledges it. Closing a prompt replaces its
blocks with the outcome through ``chat.update``.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from connectors.base import InboundEvent, Sender, SendResult, ThreadKey
from connectors.interactive import Prompt, callback_data, parse_callback, parse_select, select_id
from connectors.slack.errors import classify_send_error

__all__ = ["blocks_of", "close_prompt", "read_tap", "send_prompt"]

log = logging.getLogger("talon.connectors.slack")

_STYLES = {"primary": "primary", "danger": "danger"}


def _plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:limit] or " ", "emoji": True}


def blocks_of(prompt: Prompt) -> list[dict[str, Any]]:
    section = {"type": "section", "text": _plain(prompt.text, 3000)}
    if not prompt.options:
        return [section]
    if prompt.use_select():
        picks = [o for o in prompt.options if o.id != "skip"][:100]
        element: dict[str, Any] = {
            "type": "multi_static_select" if prompt.multi else "static_select",
            "action_id": select_id(prompt.id),
            "placeholder": _plain("Choose…", 150),
            "options": [{"text": _plain(o.label, 75), "value": o.id} for o in picks],
        }
        elements = [element] + [_button(prompt, o) for o in prompt.options if o.id == "skip"]
    else:
        elements = [_button(prompt, o) for o in prompt.options[:25]]
    return [section, {"type": "actions", "block_id": f"t:{prompt.id}", "elements": elements}]


def _button(prompt: Prompt, option: Any) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": _plain(option.label, 75),
        "action_id": callback_data(prompt.id, option.id),
        "value": option.id,
    }
    if option.style in _STYLES:
        button["style"] = _STYLES[option.style]
    return button


async def send_prompt(web: AsyncWebClient, thread: ThreadKey, prompt: Prompt) -> SendResult:
    try:
        response = await web.chat_postMessage(
            channel=thread.chat_id, thread_ts=thread.topic, text=prompt.text[:3000], blocks=blocks_of(prompt)
        )
    except Exception as exc:
        return classify_send_error(exc)
    return SendResult.sent(str(response.get("ts")))


async def close_prompt(web: AsyncWebClient, thread: ThreadKey, message_id: str, text: str) -> None:
    try:
        await web.chat_update(
            channel=thread.chat_id,
            ts=message_id,
            text=text[:3000],
            blocks=[{"type": "section", "text": _plain(text, 3000)}],
        )
    except Exception as exc:
        log.warning("could not close a prompt's buttons: %s", type(exc).__name__)


def read_tap(channel: str, body: dict[str, Any]) -> InboundEvent | None:
    """A ``block_actions`` payload -> an event with ``tap`` set; None when it is not ours."""
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        return None
    action = actions[0]
    action_id = action.get("action_id")
    if "selected_options" in action or "selected_option" in action:
        chosen = action.get("selected_options") or [action.get("selected_option")]
        tap = parse_select(action_id, [o.get("value") for o in chosen if isinstance(o, dict)])
    else:
        tap = parse_callback(action_id)
    user = body.get("user") or {}
    chat = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
    message = body.get("message") or {}
    if tap is None or not isinstance(user.get("id"), str) or not isinstance(chat, str):
        return None
    topic = message.get("thread_ts")
    trigger = body.get("trigger_id") or f"{action.get('action_ts')}:{user['id']}"
    return InboundEvent(
        channel=channel,
        event_id=f"action:{trigger}",
        thread_key=ThreadKey(channel, chat, topic if isinstance(topic, str) else None),
        chat_type="dm" if chat.startswith("D") else ("thread" if topic else "group"),
        sender=Sender(user["id"], str(user.get("name") or user.get("username") or user["id"])),
        text="",
        platform_message_id=message.get("ts"),
        raw=body,
        tap=tap,
    )
