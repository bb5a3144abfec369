"""The fake Slack's message edits, deletes, chat streams and assistant thread status.

``chat.update`` and ``chat.delete`` act on the bot's own posted messages (Slack's errors:
``message_not_found``, ``cant_update_message``); ``chat.startStream`` posts a message that
``chat.appendStream`` grows until ``chat.stopStream``; ``assistant.threads.setStatus`` records
each status. Every edit is kept with its ``time.monotonic()`` so tests can check the rate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.fakes.slack_api.model import BOT_USER_ID, MAX_TEXT, PostedMessage, State

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class Editing:
    """Handlers for :class:`tests.fakes.slack_api.web_api.WebApi`, sharing its state."""

    def __init__(self, state: State, next_ts: Callable[[], str]) -> None:
        self.state = state
        self._next_ts = next_ts

    def methods(self) -> dict[str, Handler]:
        return {
            "chat.update": self._update,
            "chat.delete": self._delete,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
            "assistant.threads.setStatus": self._set_status,
        }

    def _find(self, params: dict[str, Any]) -> PostedMessage | None:
        channel, ts = str(params.get("channel") or ""), str(params.get("ts") or "")
        found = next((m for m in self.state.posted.get(channel, ()) if m.ts == ts), None)
        return None if found is None or found.deleted else found

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._find(params)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        text = params.get("text") or ""
        if not isinstance(text, str) or (not text.strip() and not params.get("blocks")):
            return {"ok": False, "error": "no_text"}
        if len(text) > MAX_TEXT:
            return {"ok": False, "error": "msg_too_long"}
        message.versions.append(message.text)
        message.edit_times.append(time.monotonic())
        message.text = text
        if "mrkdwn" in params:  # the message's markup parsing, as postMessage sets it
            flag = params["mrkdwn"]
            message.mrkdwn = flag.lower() in ("1", "true") if isinstance(flag, str) else bool(flag)
        message.params = {**message.params, **params}
        return {"ok": True, "channel": message.channel, "ts": message.ts, "text": text}

    def _delete(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._find(params)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        message.deleted = True
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _start_stream(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, thread_ts = str(params.get("channel") or ""), params.get("thread_ts")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not thread_ts:
            return {"ok": False, "error": "invalid_arguments"}
        ts = self._next_ts()
        text = str(params.get("markdown_text") or "")
        message = PostedMessage(channel, ts, text, str(thread_ts), None, dict(params), streaming=True)
        message.stream_times.append(time.monotonic())
        self.state.posted[channel].append(message)
        self.state.authors[(channel, ts)] = BOT_USER_ID
        return {"ok": True, "channel": channel, "ts": ts}

    def _append_stream(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._find(params)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if not message.streaming:
            return {"ok": False, "error": "message_not_in_streaming_state"}
        message.text += str(params.get("markdown_text") or "")
        message.stream_times.append(time.monotonic())
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _stop_stream(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._find(params)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if not message.streaming:
            return {"ok": False, "error": "message_not_in_streaming_state"}
        message.text += str(params.get("markdown_text") or "")
        message.streaming = False
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _set_status(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, thread_ts = params.get("channel_id"), params.get("thread_ts")
        if not channel or not thread_ts:
            return {"ok": False, "error": "invalid_arguments"}
        self.state.statuses.append((str(channel), str(thread_ts), str(params.get("status") or "")))
        return {"ok": True}
