"""Retry delays: one model and one computation for every part that waits before trying again.

The queue, the outbox, the model providers and the connectors each keep their own numbers
(``queue.backoff_base`` and ``outbox.backoff_base`` in talon.yaml, the others in code) and
all compute a delay with :meth:`Backoff.delay`. Imports nothing of the project.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential delays: ``base`` before the first retry, doubling up to ``max``, jittered.

    Args:
        base (:obj:`float`): Seconds before retry number 1.
        max (:obj:`float`): The longest delay, in seconds; doubling stops there.
        jitter (:obj:`float`, optional): The share of each delay that is random: the delay is
            drawn uniformly from ``[(1 - jitter) * d, d]``, which spreads out callers that failed
            together. ``0`` waits exactly ``d``. Defaults to ``0.5``.

    Raises:
        :exc:`ValueError`: For a ``base`` or ``max`` that is not positive, or a ``jitter``
        outside ``[0, 1]``.
    """

    base: float
    max: float
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if not (self.base > 0 and self.max > 0):
            raise ValueError(f"backoff base and max must be positive seconds, not {self.base} and {self.max}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"backoff jitter must be between 0 and 1, not {self.jitter}")

    def ceiling(self, attempt: int) -> float:
        """The delay before retry number ``attempt`` (1-based) without jitter:
        ``min(max, base * 2 ** (attempt - 1))``; ``attempt`` below 1 counts as 1."""
        doublings = max(attempt - 1, 0)
        if doublings >= math.log2(self.max / self.base):
            return self.max  # also keeps 2 ** doublings from overflowing after many failures
        return min(self.max, self.base * 2**doublings)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based), jitter applied."""
        ceiling = self.ceiling(attempt)
        if not self.jitter:
            return ceiling
        return ceiling * random.uniform(1 - self.jitter, 1.0)
