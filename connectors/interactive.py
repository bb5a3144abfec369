"""Buttons and taps, neutral across platforms.

A :class:`Prompt` is a text plus options (shown as buttons, or as a select menu when there are
many); a :class:`Tap` says which prompt and which option(s) a user picked. A connector that can
show buttons implements :class:`InteractiveConnector`; a tap reaches the gateway as an
:class:`~connectors.base.InboundEvent` whose ``tap`` is set and whose ``event_id`` is the
platform's callback or interaction id, so a redelivered tap changes nothing. Where buttons are
unavailable (the console, a connector without them) the prompt is sent as text with numbered
options (:func:`numbered_text`) and the reply is read by number or text.

Callback data is ``t:<prompt id>:<option id>`` (:func:`callback_data`): the prompt id is a
short random id looked up in the store, never the payload, so it fits Telegram's 64 bytes.
Where a multi-choice prompt is shown as toggle buttons (:class:`ToggleConnector`), a choice's
button carries ``+<option id>`` (:func:`toggle_data`) and the Submit button ``=``
(:func:`submit_data`); the options toggled on are kept in the store, not in the buttons.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from connectors.base import SendResult, Tap, ThreadKey

__all__ = [
    "MAX_BUTTONS",
    "InteractiveConnector",
    "Prompt",
    "PromptOption",
    "Tap",
    "ToggleConnector",
    "callback_data",
    "numbered_text",
    "parse_callback",
    "parse_select",
    "select_id",
    "submit_data",
    "toggle_data",
]

MAX_BUTTONS = 10  # more options than this are shown as a select menu where the platform has one
_PREFIX = "t"
_TOGGLE, _SUBMIT = "+", "="


@dataclass(frozen=True, slots=True)
class PromptOption:
    """One choice. ``id`` is short (it travels in callback data); ``label`` is what users see."""

    id: str
    label: str
    style: str = "default"  # default | primary | danger


@dataclass(frozen=True, slots=True)
class Prompt:
    """A message with options. ``multi``: several options may be picked at once (a multi-select
    where the platform has one, else numbered choices replied as ``1, 3``). ``hint`` follows the
    numbered options where buttons are unavailable (how to answer by text)."""

    id: str
    text: str
    options: tuple[PromptOption, ...] = ()
    multi: bool = False
    hint: str | None = None
    selected: frozenset[str] = frozenset()  # options toggled on so far (toggle buttons)

    def use_select(self) -> bool:
        return self.multi or len(self.options) > MAX_BUTTONS


@runtime_checkable
class InteractiveConnector(Protocol):
    """A connector that shows buttons and hears taps."""

    async def send_prompt(self, thread: ThreadKey, prompt: Prompt) -> SendResult:
        """Post the prompt with its buttons. Never raises for platform errors: classify them."""

    async def close_prompt(self, thread: ThreadKey, message_id: str, text: str) -> None:
        """Replace the prompt's message with ``text`` and no buttons. Best effort; never raises."""


@runtime_checkable
class ToggleConnector(Protocol):
    """A connector that shows a multi-choice prompt as toggle buttons and a Submit button,
    redrawn after each toggle."""

    async def show_selection(self, thread: ThreadKey, message_id: str, prompt: Prompt) -> None:
        """Redraw the prompt's buttons with ``prompt.selected`` marked. Best effort; never raises."""


def callback_data(prompt_id: str, option_id: str) -> str:
    return f"{_PREFIX}:{prompt_id}:{option_id}"


def toggle_data(prompt_id: str, option_id: str) -> str:
    return f"{_PREFIX}:{prompt_id}:{_TOGGLE}{option_id}"


def submit_data(prompt_id: str) -> str:
    return f"{_PREFIX}:{prompt_id}:{_SUBMIT}"


def parse_callback(data: object) -> Tap | None:
    """The tap a button's callback data names; None for anything else (not ours, malformed)."""
    if not isinstance(data, str) or len(data) > 64:
        return None
    parts = data.split(":")
    if len(parts) != 3 or parts[0] != _PREFIX or not parts[1] or not parts[2]:
        return None
    option = parts[2]
    if option == _SUBMIT:
        return Tap(parts[1], (), "submit")
    if option.startswith(_TOGGLE) and len(option) > 1:
        return Tap(parts[1], (option[1:],), "toggle")
    return Tap(parts[1], (option,))


def select_id(prompt_id: str) -> str:
    """The custom id of a prompt's select menu (its values are option ids)."""
    return f"{_PREFIX}:{prompt_id}:_"


def parse_select(custom_id: object, values: Sequence[object]) -> Tap | None:
    tap = parse_callback(custom_id)
    if tap is None or tap.values != ("_",):
        return None
    picked = tuple(str(v) for v in values if isinstance(v, str) and len(v) <= 16)
    return Tap(tap.prompt_id, picked) if picked else None


def numbered_text(prompt: Prompt) -> str:
    """The prompt as plain text with numbered options, for a surface without buttons."""
    lines = [prompt.text]
    if prompt.options:
        lines.append("")
        lines += [f"{i}. {o.label}" for i, o in enumerate(prompt.options, 1)]
    if prompt.hint:
        lines += ["", prompt.hint]
    return "\n".join(lines)
