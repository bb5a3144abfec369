"""Uploading one file with Slack's external-upload flow, as ``files_upload_v2`` does it.

The three requests are made one by one (``files.getUploadURLExternal``, the POST of the
bytes to the URL Slack handed out, ``files.completeUploadExternal``) rather than through
``files_upload_v2``, because only the last one can make a file appear in a channel: a
failure in the first two, however it failed, left nothing a user can see, so it is safe to
try again (``TRANSIENT``), while a failure of the last one is classified like a message
post and may be ``AMBIGUOUS``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from connectors.base import ErrorClass, OutboundFile, SendResult
from connectors.slack.errors import SEND_ERRORS, classify_send_error


async def upload_file(
    client: AsyncWebClient, session: aiohttp.ClientSession, item: OutboundFile, *, timeout: float
) -> SendResult:
    """Share ``item`` in its channel (in the thread of ``item.thread.topic`` or ``reply_to``)."""
    channel = item.thread.chat_id
    thread_ts = item.thread.topic
    if thread_ts is None and item.reply_to and not channel.startswith("D"):
        thread_ts = item.reply_to
    try:
        ticket = await client.files_getUploadURLExternal(filename=item.name, length=item.size)
        upload_url, file_id = ticket.get("upload_url"), ticket.get("file_id")
        if not isinstance(upload_url, str) or not isinstance(file_id, str):
            return SendResult.failed(
                ErrorClass.TRANSIENT, "slack: files.getUploadURLExternal gave no upload_url"
            )
        status = await _post_file(session, upload_url, Path(item.path), timeout)
    except SEND_ERRORS as exc:
        return _nothing_shared(classify_send_error(exc))
    if status != 200:
        kind = ErrorClass.TRANSIENT if status >= 500 or status == 429 else ErrorClass.PERMANENT
        return SendResult.failed(kind, f"slack: the file upload was answered {status}")
    try:
        done = await client.files_completeUploadExternal(
            files=[{"id": file_id, "title": item.name}], channel_id=channel, thread_ts=thread_ts
        )
    except SEND_ERRORS as exc:
        return classify_send_error(exc)
    files = done.get("files") or []
    shared = files[0].get("id") if files and isinstance(files[0], dict) else file_id
    return SendResult.sent(str(shared))


async def _post_file(session: aiohttp.ClientSession, url: str, path: Path, timeout: float) -> int:
    # aiohttp streams an open file in chunks, so a large upload never sits in memory whole.
    stream = await asyncio.to_thread(path.open, "rb")
    try:
        async with session.post(url, data=stream, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            await resp.read()
            return resp.status
    finally:
        stream.close()


def _nothing_shared(result: SendResult) -> SendResult:
    """Before ``completeUploadExternal`` no file is visible: an unclear outcome is a retry."""
    if result.error_class is ErrorClass.AMBIGUOUS:
        return SendResult.failed(ErrorClass.TRANSIENT, f"{result.error} (before sharing; retried)")
    return result
