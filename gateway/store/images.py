"""The ``generated_images`` table: what image_generate and image_edit made, for their caps and
for a retried turn to find the image its interrupted attempt already made.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = ["ImageCounts", "MadeImage", "image_counts", "mark_posted", "record_image", "reusable_image"]


@dataclass(frozen=True, slots=True)
class ImageCounts:
    thread: int  # images of this kind the thread made
    day: int  # images of any kind made since the day began, in every thread


@dataclass(frozen=True, slots=True)
class MadeImage:
    id: int
    path: str
    posted: bool


def image_counts(conn: sqlite3.Connection, thread_id: int, kind: str, day_start: float) -> ImageCounts:
    (thread,) = conn.execute(
        "SELECT COUNT(*) FROM generated_images WHERE thread_id = ? AND kind = ?", (thread_id, kind)
    ).fetchone()
    (day,) = conn.execute(
        "SELECT COUNT(*) FROM generated_images WHERE created_at >= ?", (day_start,)
    ).fetchone()
    return ImageCounts(int(thread), int(day))


def reusable_image(
    conn: sqlite3.Connection, thread_id: int, request_key: str, run_id: int | None
) -> MadeImage | None:
    """The newest image the thread made for the same request in a run that did not finish
    (interrupted by a crash, failed, or still marked running) other than ``run_id``."""
    row = conn.execute(
        "SELECT g.id, g.path, g.posted FROM generated_images g LEFT JOIN runs r ON r.id = g.run_id "
        "WHERE g.thread_id = ? AND g.request_key = ? AND g.run_id IS NOT NULL AND g.run_id IS NOT ? "
        "AND r.status IN ('interrupted', 'failed', 'running') ORDER BY g.id DESC LIMIT 1",
        (thread_id, request_key, run_id),
    ).fetchone()
    return MadeImage(int(row[0]), str(row[1]), bool(row[2])) if row else None


def record_image(
    conn: sqlite3.Connection,
    *,
    thread_id: int,
    run_id: int | None,
    persona: str,
    kind: str,
    request_key: str,
    path: str,
    now: float,
) -> int:
    (image_id,) = conn.execute(
        "INSERT INTO generated_images (thread_id, run_id, persona, kind, request_key, path, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (thread_id, run_id, persona, kind, request_key, path, now),
    ).fetchone()
    return int(image_id)


def mark_posted(conn: sqlite3.Connection, image_id: int, run_id: int | None) -> None:
    """The image reached the outbox; ``run_id`` (a retried turn's) now owns it."""
    conn.execute("UPDATE generated_images SET posted = 1, run_id = ? WHERE id = ?", (run_id, image_id))
