"""How often one address may fail to sign in as one user: at most ``attempts`` failures in a
sliding ``window``, then the pair waits until the oldest failure leaves the window. A success
clears the pair. Memory is bounded: at most :data:`MAX_KEYS` pairs are tracked."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

__all__ = ["MAX_KEYS", "LoginLimiter"]

MAX_KEYS = 10_000


class LoginLimiter:
    def __init__(self, attempts: int, window: float, clock: Callable[[], float] = time.monotonic):
        self.attempts = attempts
        self.window = window
        self.clock = clock
        self._failures: dict[tuple[str, str], deque[float]] = {}

    def wait(self, address: str, user: str) -> float:
        """Seconds until ``address`` may try ``user`` again; 0 when it may now."""
        failures = self._failures.get((address, user.lower()))
        if not failures:
            return 0.0
        now = self.clock()
        while failures and now - failures[0] >= self.window:
            failures.popleft()
        if len(failures) < self.attempts:
            return 0.0
        return max(0.0, failures[0] + self.window - now)

    def failed(self, address: str, user: str) -> None:
        key = (address, user.lower())
        if key not in self._failures and len(self._failures) >= MAX_KEYS:
            self._sweep()
        failures = self._failures.setdefault(key, deque(maxlen=self.attempts))
        failures.append(self.clock())

    def succeeded(self, address: str, user: str) -> None:
        self._failures.pop((address, user.lower()), None)

    def _sweep(self) -> None:
        now = self.clock()
        for key in [k for k, f in self._failures.items() if not f or now - f[-1] >= self.window]:
            del self._failures[key]
        while len(self._failures) >= MAX_KEYS:  # all recent: drop the oldest tracked pair
            del self._failures[next(iter(self._failures))]
