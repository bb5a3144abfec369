"""Inline keyboards on Telegram: prompts with buttons, and ``callback_query`` taps.

A button's callback data is ``t:<prompt id>:<option id>`` (:mod:`connectors.interactive`), far
under Telegram's 64 bytes; the prompt itself is looked up in the store. A tap becomes an
:class:`~connectors.base.InboundEvent` whose ``event_id`` is the callback query id (Telegram
redelivers the update with the same id), answered with ``answerCallbackQuery`` after intake
returns. Closing a prompt edits its text and drops the keyboard in one ``editMessageText``.

A multi-choice prompt shows one toggle button per choice (☐/☑), then Submit (and Skip): a tap
toggles the choice in the store and the keyboard is redrawn with ``editMessageReplyMarkup``.
"""

from __future__ import annotations

import logging
from typing import Any

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from connectors.base import InboundEvent, Sender, SendResult, ThreadKey
from connectors.interactive import Prompt, callback_data, parse_callback, submit_data, toggle_data
from connectors.policy import ChannelPolicy
from connectors.telegram.api import TelegramBot, redact
from connectors.telegram.inbound import chat_type_of, thread_key_of
from connectors.telegram.sending import chat_ref, classify

__all__ = ["answer_tap", "close_prompt", "read_tap", "send_prompt", "show_selection"]

log = logging.getLogger("talon.connectors.telegram")

_PER_ROW = 2
_TOAST_CHARS = 200  # answerCallbackQuery text holds 0-200 characters
_ON, _OFF = "☑", "☐"
_TOGGLE_HINT = "Tap your choices, then Submit."


def keyboard(prompt: Prompt) -> InlineKeyboardMarkup:
    if prompt.multi:
        return _toggles(prompt)
    buttons = [
        InlineKeyboardButton(o.label, callback_data=callback_data(prompt.id, o.id)) for o in prompt.options
    ]
    per_row = 1 if any(len(o.label) > 20 for o in prompt.options) else _PER_ROW
    rows = [buttons[i : i + per_row] for i in range(0, len(buttons), per_row)]
    return InlineKeyboardMarkup(rows)


def _toggles(prompt: Prompt) -> InlineKeyboardMarkup:
    """One toggle per choice, a row each (labels stay readable), then Submit and Skip."""
    rows = [
        [
            InlineKeyboardButton(
                f"{_ON if o.id in prompt.selected else _OFF} {o.label}",
                callback_data=toggle_data(prompt.id, o.id),
            )
        ]
        for o in prompt.options
        if o.id != "skip"
    ]
    last = [InlineKeyboardButton("Submit", callback_data=submit_data(prompt.id))]
    last += [
        InlineKeyboardButton(o.label, callback_data=callback_data(prompt.id, o.id))
        for o in prompt.options
        if o.id == "skip"
    ]
    return InlineKeyboardMarkup([*rows, last])


def _topic(thread: ThreadKey) -> int | None:
    return int(thread.topic) if thread.topic and thread.topic.isdigit() else None


async def send_prompt(bot: TelegramBot, thread: ThreadKey, prompt: Prompt) -> SendResult:
    """Post the prompt with its keyboard (toggles and Submit for several choices at once)."""
    text = f"{prompt.text}\n\n{_TOGGLE_HINT}" if prompt.multi else prompt.text
    try:
        message = await bot.send_message(
            chat_ref(thread.chat_id),
            text[:4096],
            message_thread_id=_topic(thread),
            reply_markup=keyboard(prompt) if prompt.options else None,
        )
    except Exception as exc:
        return classify(exc, bot.token)
    return SendResult.sent(str(message.message_id))


async def close_prompt(bot: TelegramBot, thread: ThreadKey, message_id: str, text: str) -> None:
    """The prompt's text with the outcome, and no keyboard (an edit without reply_markup drops it)."""
    try:
        await bot.edit_message_text(text[:4096], chat_id=chat_ref(thread.chat_id), message_id=int(message_id))
    except (TelegramError, ValueError) as exc:
        log.warning("could not close a prompt's buttons: %s", redact(str(exc), bot.token))


async def show_selection(bot: TelegramBot, thread: ThreadKey, message_id: str, prompt: Prompt) -> None:
    """Redraw a multi-choice keyboard with ``prompt.selected`` ticked. Best effort."""
    try:
        await bot.edit_message_reply_markup(
            chat_id=chat_ref(thread.chat_id), message_id=int(message_id), reply_markup=keyboard(prompt)
        )
    except (TelegramError, ValueError) as exc:
        log.info("could not redraw a prompt's toggles: %s", redact(str(exc), bot.token))


def read_tap(
    channel: str, bot: TelegramBot, raw: dict[str, Any], policy: ChannelPolicy
) -> InboundEvent | None:
    """A ``callback_query`` update -> an event with ``tap`` set; None when it is not one of ours
    (no message, foreign callback data) or the policy refuses the sender."""
    query = CallbackQuery.de_json(raw["callback_query"], bot)
    tap = parse_callback(query.data)
    message = query.message
    if tap is None or message is None or not hasattr(message, "chat"):
        return None
    user = query.from_user
    chat_id = str(message.chat.id)
    if not policy.admits(str(user.id), chat_id, is_bot=user.is_bot):
        return None
    return InboundEvent(
        channel=channel,
        event_id=f"cb:{query.id}",
        thread_key=thread_key_of(channel, message),  # type: ignore[arg-type]
        chat_type=chat_type_of(message),  # type: ignore[arg-type]
        sender=Sender(str(user.id), user.full_name or user.username or str(user.id), is_bot=user.is_bot),
        text="",
        platform_message_id=str(message.message_id),
        raw=raw,
        tap=tap,
    )


async def answer_tap(bot: TelegramBot, raw: dict[str, Any], text: str | None) -> None:
    """Answer the callback query (the client stops its spinner and shows ``text``). Best effort."""
    query_id = (raw.get("callback_query") or {}).get("id")
    if not query_id:
        return
    try:
        await bot.answer_callback_query(str(query_id), text=(text or "")[:_TOAST_CHARS] or None)
    except TelegramError as exc:
        log.info("could not answer a button tap: %s", redact(str(exc), bot.token))
