"""Voice notes heard before their turn: the transcript is stored on the message, then the turn
reads it as the message's text.

Where: at the start of the turn, after the intake commit. Transcribing before the commit would
hold the platform's acknowledgement for a network call (and a redelivery would pay for it
again); at the turn, the thread's lease already serializes the work, and the transcript (or the
reason there is none) is written onto the message's attachment entry in one transaction with
the notice to the sender, so a retried turn neither transcribes again nor tells twice.

A voice note is never dropped in silence: when transcription is not configured, the audio cannot
be read, or the endpoint keeps failing after its bounded retries, the entry gets a
``transcript_note``, the sender is told plainly, and the persona still gets the message with
the note and the audio file's workspace path. With ``echo: true`` the transcript is posted back
("Heard: …") so the sender can check it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from connectors.base import Connector
from gateway.config import Settings
from gateway.outbox import Outbox, ThreadAddress, enqueue_chunks, next_pending
from gateway.runtime.model import ProviderError
from gateway.store.db import Database
from gateway.store.messages import MessageRow, set_attachments
from gateway.store.threads import ThreadRow
from gateway.voice.audio_files import is_audio, ready_for_transcription
from gateway.voice.clients import AudioClients, transcription_for
from gateway.voice.ffmpeg import AudioToolError
from gateway.workspaces import WORKSPACE, thread_folder

__all__ = ["ECHO_CHARS", "Hearing", "wants_hearing"]

log = logging.getLogger("talon.voice")

ECHO_CHARS = 600
NOT_CONFIGURED = "transcription is not configured (transcription.provider in talon.yaml)"


def wants_hearing(entry: dict[str, Any]) -> bool:
    """An audio entry in the workspace that has neither a transcript nor a note yet."""
    return (
        is_audio(entry)
        and bool(entry.get("path"))
        and "transcript" not in entry
        and "transcript_note" not in entry
    )


class Hearing:
    """Args:
    clients: the providers' audio clients.
    workspaces_path: the workspaces' root (``workspaces_dir``).
    """

    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        connectors: Mapping[str, Connector],
        outbox: Outbox,
        clients: AudioClients,
        workspaces_path: Path,
    ):
        self.db = db
        self.settings = settings
        self.connectors = connectors
        self.outbox = outbox
        self.clients = clients
        self.workspaces_path = workspaces_path

    async def hear(
        self, thread: ThreadRow, message_ids: Iterable[int], rows: Sequence[MessageRow]
    ) -> list[MessageRow]:
        """``rows`` with the batch's (``message_ids``) voice notes transcribed and stored."""
        batch = set(message_ids)
        out = []
        for row in rows:
            if row.id in batch and row.role == "user" and row.attachments:
                entries = json.loads(row.attachments)
                if any(wants_hearing(e) for e in entries):
                    row = await self._hear_row(thread, row, entries)
            out.append(row)
        return out

    async def _hear_row(
        self, thread: ThreadRow, row: MessageRow, entries: list[dict[str, Any]]
    ) -> MessageRow:
        settings = transcription_for(self.settings, thread.channel)
        connector = self.connectors.get(thread.channel)
        if connector is not None and settings.provider:
            with contextlib.suppress(Exception):
                await connector.set_working(thread.key, True)
        notices = []
        for entry in entries:
            if not wants_hearing(entry):
                continue
            if not settings.provider or thread.persona is None:
                entry["transcript_note"] = NOT_CONFIGURED
                notices.append(_not_heard(entry, "transcription is not set up here"))
                continue
            try:
                await self._transcribe(thread, entry, settings)
            except (AudioToolError, ProviderError, OSError, ValueError) as exc:
                reason = _reason(exc)
                log.warning(
                    "a voice note could not be transcribed: %s", reason, extra={"thread_id": thread.id}
                )
                entry["transcript_note"] = f"not transcribed: {reason}"
                notices.append(_not_heard(entry, reason))
                continue
            if settings.echo and entry["transcript"]:
                notices.append(_heard(entry["transcript"]))
        stored = json.dumps(entries)
        await self._store(thread, row.id, stored, [connector.render(n) for n in notices] if connector else [])
        return replace(row, attachments=stored)

    async def _transcribe(self, thread: ThreadRow, entry: dict[str, Any], settings: Any) -> None:
        started = time.perf_counter()
        path = self._host_path(thread, str(entry["path"]))
        audio = await ready_for_transcription(path, str(entry.get("name") or path.name), settings)
        prepared = time.perf_counter()
        client = await self.clients.get(settings.provider)
        text = await client.transcribe(
            audio.data,
            audio.filename,
            audio.mime,
            model=settings.model,
            language=settings.language,
            timeout=settings.timeout,
            attempts=settings.max_attempts,
        )
        entry["transcript"] = text
        entry["audio_seconds"] = round(audio.seconds, 1)
        if audio.cut_at is not None:
            entry["transcript_cut_at"] = audio.cut_at
        log.info(
            "voice note transcribed",
            extra={
                "thread_id": thread.id,
                "audio_seconds": round(audio.seconds, 1),
                "converted": audio.converted,
                "prepare_ms": round((prepared - started) * 1000, 1),
                "transcribe_ms": round((time.perf_counter() - prepared) * 1000, 1),
            },
        )

    def _host_path(self, thread: ThreadRow, virtual: str) -> Path:
        """The file behind a ``/workspace/...`` path, refused if it (or a link) leads out."""
        root = thread_folder(self.workspaces_path, str(thread.persona), thread.id).resolve()
        relative = virtual[len(WORKSPACE) :].lstrip("/") if virtual.startswith(WORKSPACE + "/") else None
        if not relative:
            raise ValueError("the audio file is not in the thread's workspace")
        real = (root / relative).resolve(strict=True)
        if not real.is_relative_to(root) or not real.is_file():
            raise ValueError("the audio file is no longer a plain file in the workspace")
        return real

    async def _store(self, thread: ThreadRow, message_id: int, stored: str, notices: list[Any]) -> None:
        address = ThreadAddress(thread.id, thread.key)

        def commit(conn: sqlite3.Connection) -> sqlite3.Row | None:
            set_attachments(conn, message_id, stored)
            ids = [i for chunks in notices for i in enqueue_chunks(conn, address, chunks)]
            return next_pending(conn, thread.id) if ids else None

        next_row = await self.db.run_transaction(commit)
        if next_row is not None:
            self.outbox.notify(thread.id, next_row)


def _heard(transcript: str) -> str:
    shown = transcript if len(transcript) <= ECHO_CHARS else transcript[:ECHO_CHARS].rstrip() + "…"
    return f"Heard: “{shown}”"


def _not_heard(entry: dict[str, Any], reason: str) -> str:
    return (
        f"I got your voice note but could not listen to it ({reason}). "
        "It is kept as an audio file; please type what you said if it matters."
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "the audio file is missing"
    if isinstance(exc, ProviderError):
        text = str(exc).replace("model provider", "audio provider")
        return "the transcription service did not answer" if not text else text[:240]
    if isinstance(exc, OSError):
        return exc.strerror or "the audio file could not be read"
    return str(exc)[:240]
