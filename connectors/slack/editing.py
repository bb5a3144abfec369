"""Editing and deleting the bot's messages (``chat.update``, ``chat.delete``), Slack's chat
streams (``chat.startStream`` / ``appendStream`` / ``stopStream``) and the assistant thread
status (``assistant.threads.setStatus``), for streamed replies and live progress.
"""

from __future__ import annotations

from collections.abc import Callable

from slack_sdk.web.async_client import AsyncWebClient

from connectors.base import ChatType, ErrorClass, RenderedChunk, SendResult, ThreadKey
from connectors.slack.errors import SEND_ERRORS, classify_send_error
from connectors.streaming import NativeStream

PREVIEW_LIMIT = 3900  # characters; Slack allows 40,000, a preview needs far fewer
_INTERVAL = 1.0  # Slack allows about one message (or update) per second per channel
_GONE = ("message_not_found", "cant_update_message", "edit_window_closed", "cant_delete_message")


def _thread_ts(thread: ThreadKey, reply_to: str | None) -> str | None:
    """The thread a message goes to: the key's, or in a channel the message it answers."""
    if thread.topic:
        return thread.topic
    return reply_to if reply_to and not thread.chat_id.startswith("D") else None


def _failed(exc: BaseException) -> SendResult:
    result = classify_send_error(exc)
    if result.error and any(code in result.error for code in _GONE):
        return SendResult.failed(ErrorClass.PERMANENT, result.error)
    return result


class SlackEditor:
    """The :class:`connectors.streaming.MessageEditor` of a Slack channel.

    Args:
        client: the channel's Web API client, once started.
        escape: escapes text so Slack shows it as written (``&``, ``<``, ``>``).
    """

    def __init__(self, client: Callable[[], AsyncWebClient | None], escape: Callable[[str], str]) -> None:
        self._client = client
        self._escape = escape

    def min_interval(self, thread: ThreadKey) -> float:
        return _INTERVAL

    def preview_limit(self) -> int:
        return PREVIEW_LIMIT

    async def post(self, thread: ThreadKey, text: str, reply_to: str | None) -> SendResult:
        client = self._client()
        if client is None:
            return SendResult.failed(ErrorClass.TRANSIENT, "the Slack channel is not running")
        kwargs: dict[str, object] = {"channel": thread.chat_id, "text": self._escape(text), "mrkdwn": False}
        thread_ts = _thread_ts(thread, reply_to)
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        try:
            resp = await client.chat_postMessage(**kwargs)  # type: ignore[arg-type]
        except SEND_ERRORS as exc:
            return classify_send_error(exc)
        ts = resp.get("ts")
        return SendResult.sent(ts if isinstance(ts, str) else None)

    async def edit(self, thread: ThreadKey, message_id: str, chunk: RenderedChunk) -> SendResult:
        client = self._client()
        if client is None:
            return SendResult.failed(ErrorClass.TRANSIENT, "the Slack channel is not running")
        is_mrkdwn = chunk.format == "mrkdwn"
        text = chunk.text if is_mrkdwn else self._escape(chunk.plain or chunk.text)
        try:
            # The preview was posted with mrkdwn off: the final rendering turns it back on.
            await client.chat_update(channel=thread.chat_id, ts=message_id, text=text, mrkdwn=is_mrkdwn)
        except SEND_ERRORS as exc:
            return _failed(exc)
        return SendResult.sent(message_id)

    async def delete(self, thread: ThreadKey, message_id: str) -> SendResult:
        client = self._client()
        if client is None:
            return SendResult.failed(ErrorClass.TRANSIENT, "the Slack channel is not running")
        try:
            await client.chat_delete(channel=thread.chat_id, ts=message_id)
        except SEND_ERRORS as exc:
            result = _failed(exc)
            return SendResult.sent(message_id) if "message_not_found" in (result.error or "") else result
        return SendResult.sent(message_id)

    def native(self, thread: ThreadKey, chat_type: ChatType) -> NativeStream | None:
        """Chat streams live in threads; a DM without one gets an edited preview instead."""
        client = self._client()
        if client is None or not thread.topic:
            return None
        return SlackStream(client, thread)

    def status_here(self, thread: ThreadKey) -> bool:
        """Whether ``thread`` may show a status natively: a thread (an assistant thread's status).
        Where Slack refuses it, the status goes into the preview instead."""
        return bool(thread.topic)

    async def set_status(self, thread: ThreadKey, status: str) -> SendResult:
        """Show ``status`` under the assistant thread ("" clears it)."""
        client = self._client()
        if client is None or not thread.topic:
            return SendResult.failed(ErrorClass.PERMANENT, "not an assistant thread")
        try:
            await client.assistant_threads_setStatus(
                channel_id=thread.chat_id, thread_ts=thread.topic, status=status
            )
        except SEND_ERRORS as exc:
            return classify_send_error(exc)
        return SendResult.sent(None)


class SlackStream:
    """A reply streamed with ``chat.startStream`` / ``appendStream`` / ``stopStream``: the
    streamed message stays, and the final rendering then replaces it with ``chat.update``."""

    appends = True  # Slack appends what is sent: the text must only grow (no status line)

    def __init__(self, client: AsyncWebClient, thread: ThreadKey) -> None:
        self._client = client
        self._thread = thread
        self.message_id: str | None = None
        self._segment = ""  # the current answer's text as streamed so far

    async def update(self, text: str) -> SendResult:
        channel, thread_ts = self._thread.chat_id, self._thread.topic or ""
        if text.startswith(self._segment):
            delta = text[len(self._segment) :]
        else:  # the model started a new answer after a tool call: it follows the earlier text
            delta = "\n\n" + text
        if not delta:
            return SendResult.sent(self.message_id)
        try:
            if self.message_id is None:
                resp = await self._client.chat_startStream(
                    channel=channel, thread_ts=thread_ts, markdown_text=delta
                )
                ts = resp.get("ts")
                self.message_id = ts if isinstance(ts, str) else None
            else:
                await self._client.chat_appendStream(channel=channel, ts=self.message_id, markdown_text=delta)
        except SEND_ERRORS as exc:
            return classify_send_error(exc)
        self._segment = text
        return SendResult.sent(self.message_id)

    async def finish(self) -> SendResult:
        if self.message_id is None:
            return SendResult.sent(None)
        try:
            await self._client.chat_stopStream(channel=self._thread.chat_id, ts=self.message_id)
        except SEND_ERRORS as exc:
            return classify_send_error(exc)
        return SendResult.sent(self.message_id)
