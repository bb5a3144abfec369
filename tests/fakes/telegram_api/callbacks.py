"""Inline keyboards and callback queries on the fake Bot API.

``sendMessage`` and ``editMessageText`` keep the ``reply_markup`` they were sent (an edit without
one removes the keyboard, as Telegram does); ``editMessageReplyMarkup`` replaces it. A test taps
a button with :meth:`CallbackQueries.tap`: a ``callback_query`` update carrying the button's
``callback_data``, refused unless the message shows that button now. ``answerCallbackQuery``
accepts each query id once (a second answer, or an unknown id, gets Telegram's 400).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from tests.fakes.telegram_api.state import ApiError, BotApiState, bad_request

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
_OLD_QUERY = "query is too old and response timeout expired or query ID is invalid"


class CallbackQueries:
    def __init__(self, api: BotApiState, inject: Callable[[dict[str, Any]], int]) -> None:
        self._api = api
        self._inject = inject
        self._ids = itertools.count(7_000_000_001)
        self.markups: dict[tuple[int, int], list[list[dict[str, Any]]] | None] = {}
        self.queries: dict[str, dict[str, Any]] = {}  # id -> the callback query sent
        self.answers: dict[str, dict[str, Any]] = {}  # id -> answerCallbackQuery params
        self.refused_answers = 0

    def handlers(self, send: Handler, edit: Handler) -> dict[str, Handler]:
        async def send_message(params: dict[str, Any]) -> Any:
            message = await send(params)
            self._keep(message, params.get("reply_markup"))
            return message

        async def edit_message_text(params: dict[str, Any]) -> Any:
            message = await edit(params)
            self._keep(message, params.get("reply_markup"))
            return message

        return {
            "sendmessage": send_message,
            "editmessagetext": edit_message_text,
            "editmessagereplymarkup": self._edit_markup,
            "answercallbackquery": self._answer,
        }

    def _keep(self, message: dict[str, Any], markup: Any) -> None:
        if isinstance(markup, str):
            markup = json.loads(markup)
        rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
        key = (int(message["chat"]["id"]), int(message["message_id"]))
        self.markups[key] = rows or None
        if rows:
            message["reply_markup"] = {"inline_keyboard": rows}
        else:
            message.pop("reply_markup", None)

    def buttons(self, chat_id: int, message_id: int) -> list[dict[str, Any]]:
        """The buttons the message shows now, row by row flattened."""
        rows = self.markups.get((int(chat_id), int(message_id))) or []
        return [b for row in rows for b in row]

    def tap(
        self, chat_id: int, message_id: int, label: str, *, user_id: int, query_id: str | None = None
    ) -> str:
        """The user taps the button labelled ``label``; returns the callback query id."""
        button = next((b for b in self.buttons(chat_id, message_id) if b["text"] == label), None)
        if button is None:
            raise AssertionError(f"message {message_id} shows no button {label!r}")
        return self.tap_data(chat_id, message_id, button["callback_data"], user_id=user_id, query_id=query_id)

    def tap_data(
        self, chat_id: int, message_id: int, data: str, *, user_id: int, query_id: str | None = None
    ) -> str:
        """A callback query with this data, whatever the message shows (a stale client)."""
        message = self._api._messages[int(chat_id)][int(message_id)]
        qid = query_id or str(next(self._ids))
        user = {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}
        query = {"id": qid, "from": user, "message": message, "chat_instance": "1", "data": data}
        self.queries[qid] = query
        self._inject({"callback_query": query})
        return qid

    async def _edit_markup(self, params: dict[str, Any]) -> Any:
        chat_id, message_id = int(params.get("chat_id") or 0), int(params.get("message_id") or 0)
        message = self._api._messages.get(chat_id, {}).get(message_id)
        if message is None:
            raise bad_request("message to edit not found")
        before = self.markups.get((chat_id, message_id))
        self._keep(message, params.get("reply_markup"))
        if self.markups.get((chat_id, message_id)) == before:
            raise bad_request("message is not modified")
        return message

    async def _answer(self, params: dict[str, Any]) -> bool:
        qid = str(params.get("callback_query_id") or "")
        if qid not in self.queries or qid in self.answers:
            self.refused_answers += 1
            raise ApiError(400, f"Bad Request: {_OLD_QUERY}")
        self.answers[qid] = params
        return True
