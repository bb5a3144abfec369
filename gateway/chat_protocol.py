"""What both faces of ``talon chat`` say to the daemon: the ``chat`` request for a typed line,
the one-line failure, and the confirmation of what was shown (the ``seen`` op)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import Any

from gateway.control_client import ControlClient, DaemonNotRunningError
from gateway.errors import RefusedError

__all__ = ["SEEN_TIMEOUT", "ChatFailedError", "chat_request", "confirm_seen"]

SEEN_TIMEOUT = 2.0
"""Seconds a confirmation of what was shown may take; past that it is left for next time
(the window then shows those deliveries once more rather than never)."""


class ChatFailedError(RefusedError):
    """The daemon answered without a reply (it refused the message, or the turn failed);
    the message is the one-line reason."""


def chat_request(text: str, *, thread: str, persona: str | None) -> dict[str, Any]:
    """The ``chat`` op for one typed line (a fresh ``event_id``, so a retry is not a second message)."""
    return {"op": "chat", "thread": thread, "persona": persona, "text": text, "event_id": uuid.uuid4().hex}


async def confirm_seen(data_dir: Path, thread: str, upto: int) -> bool:
    """Tell the daemon the thread's deliveries up to ``upto`` were shown (bounded in time);
    False when it could not be told."""
    with contextlib.suppress(DaemonNotRunningError, ConnectionError, OSError, TimeoutError):
        async with asyncio.timeout(SEEN_TIMEOUT), ControlClient(data_dir) as client:
            return (await client.call({"op": "seen", "thread": thread, "upto": upto})).get("type") == "done"
    return False
