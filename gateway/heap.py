"""Garbage-collector settings for the long-running daemon.

After start-up the heap holds hundreds of thousands of long-lived objects (SDKs, config
models, compiled schemas). A full collection walks all of them and stalls the event loop
for tens of milliseconds, and CPython's default young-generation threshold (700
allocations) starts collections hundreds of times a second under load. Freezing the
start-up heap takes it out of every later collection; a larger young threshold collects
the short-lived garbage of many messages at once.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000  # allocations between young collections
OLDER_THRESHOLDS = (20, 20)  # young collections per middle one, middle per full


def settle_heap() -> None:
    """Collect once, then freeze what survives and raise the collection thresholds.

    Call when start-up is complete (providers warmed up): whatever exists then lives as
    long as the daemon.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
