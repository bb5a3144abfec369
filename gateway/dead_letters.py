"""Dead letters an operator lists, retries or drops (``talon dead-letters``).

The daemon owns the queue, so while it runs these go through its control socket (the
``dead_letters`` op, served here) and a retried item is handed to the running queue at
once; while it is stopped, ``talon dead-letters`` holds the data-dir lock and applies them
to the database, and the next start runs what was retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from gateway.ndjson_socket import Reply
from gateway.store.db import Database
from gateway.store.queue import dead_letters, drop_dead_letter, retry_dead_letter

__all__ = ["ACTIONS", "OP", "DeadLetterOps", "manage"]

OP = "dead_letters"
ACTIONS = ("list", "retry", "drop")
LISTED = 200


async def manage(
    db: Database, action: str, item_id: int | None, *, notify: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Apply ``action`` and say what happened: ``{"ok": ...}`` with ``letters`` for ``list``,
    ``thread_id`` for ``retry``, or ``error`` saying what to send instead."""
    if action == "list":
        return {"ok": True, "letters": [asdict(d) for d in await db.read(dead_letters, LISTED)]}
    if action not in ACTIONS:
        return {"ok": False, "error": f"unknown action {action!r}; use one of {', '.join(ACTIONS)}"}
    if not isinstance(item_id, int) or isinstance(item_id, bool):
        return {"ok": False, "error": f"{action} needs the dead letter's id (the # number `list` shows)"}
    now = time.time()
    if action == "retry":
        thread_id = await db.run_transaction(retry_dead_letter, item_id, now)
        if thread_id is None:
            return {"ok": False, "error": f"no dead letter #{item_id}; `talon dead-letters` lists them"}
        if notify is not None:
            notify(thread_id)
        return {"ok": True, "thread_id": thread_id}
    if not await db.run_transaction(drop_dead_letter, item_id, now):
        return {"ok": False, "error": f"no dead letter #{item_id}; `talon dead-letters` lists them"}
    return {"ok": True}


class DeadLetterOps:
    """Serves the control socket's ``dead_letters`` op.

    Args:
        db (:class:`gateway.store.db.Database`): The daemon's database.
        notify (Callable[[:obj:`int`], None]): Tells the queue a thread has work again.
    """

    def __init__(self, db: Database, notify: Callable[[int], None]):
        self.db = db
        self.notify = notify

    async def handle_control(self, request: dict[str, Any], reply: Reply) -> bool:
        if request.get("op") != OP:
            return False
        result = await manage(
            self.db, str(request.get("action", "list")), request.get("id"), notify=self.notify
        )
        await reply({"type": "done", **result})
        return True
