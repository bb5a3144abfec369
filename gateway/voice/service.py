"""The turn runner's one voice seam: hear a batch's voice notes, speak its reply."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence

from connectors.base import Connector
from gateway.config import Settings
from gateway.outbox import Outbox
from gateway.store.db import Database
from gateway.store.messages import MessageRow
from gateway.store.outbox import OutboxFile
from gateway.store.threads import ThreadRow
from gateway.voice.audio_files import is_audio
from gateway.voice.clients import AudioClients
from gateway.voice.hearing import Hearing
from gateway.voice.speaking import Speaking
from gateway.voice_settings import SpeechSettings

__all__ = ["Voice"]

_REMEMBERED_RUNS = 1024


class Voice:
    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        connectors: Mapping[str, Connector],
        outbox: Outbox,
    ):
        self.clients = AudioClients(settings)
        self.hearing = Hearing(
            db=db,
            settings=settings,
            connectors=connectors,
            outbox=outbox,
            clients=self.clients,
            workspaces_path=settings.workspaces_path,
        )
        self.speaking = Speaking(settings=settings, clients=self.clients, spool=outbox.spool)
        self._voiced: OrderedDict[int, bool] = OrderedDict()  # run id -> its batch had a voice note

    async def hear(
        self, thread: ThreadRow, run_id: int, message_ids: Iterable[int], rows: Sequence[MessageRow]
    ) -> list[MessageRow]:
        """``rows`` with the batch's voice notes transcribed (see :mod:`gateway.voice.hearing`)."""
        ids = set(message_ids)
        heard = await self.hearing.hear(thread, ids, rows)
        self._voiced[run_id] = any(
            is_audio(entry)
            for row in heard
            if row.id in ids and row.attachments
            for entry in json.loads(row.attachments)
        )
        while len(self._voiced) > _REMEMBERED_RUNS:  # runs that failed before their reply
            self._voiced.popitem(last=False)
        return heard

    async def spoken_reply(
        self, run_id: int, channel: str, plain: str, limit: int, persona: SpeechSettings | None = None
    ) -> list[OutboxFile]:
        """The reply's voice message to commit with it: none, or one spooled file. ``persona``: the
        answering persona's own ``speech``, which wins over the channel's."""
        if not self.speaking.wanted(channel, self._voiced.pop(run_id, False), persona):
            return []
        spoken = await self.speaking.voice_message(channel, plain, limit, persona)
        return [spoken] if spoken is not None else []

    async def close(self) -> None:
        await self.clients.close()
