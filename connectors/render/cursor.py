"""What cutting a block into heads is made of: the :class:`Cursor` over the rest of a block,
and the searches every cursor shares.

A cut takes ``measure`` (a block -> its rendered length as a top-level block) and ``limit``;
the head returned satisfies ``measure(head) <= limit``. Searches gallop from a guess and
then bisect (:func:`last_fitting`), so that their cost follows what a message holds.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from connectors.render.bounds import lower_bound
from connectors.render.ir import Block

Measure = Callable[[Block], int]
Cut = tuple[int, int]  # drop [start, end): the head ends before start, the rest starts at end
Step = tuple[Block, str]  # a head, and the plain text dropped between it and the rest
Finder = Callable[[int], Cut | None]  # a level's last boundary in the head that ends at a position

VISIBLE = re.compile(r"\S")


class Cursor(ABC):
    """The rest of a block that is being cut into heads, front first."""

    @abstractmethod
    def bound(self, cap: float) -> int:
        """A lower bound of the rest's rendered length on every platform (counting may stop
        once it passes ``cap``)."""

    @abstractmethod
    def rest(self) -> Block:
        """The rest as a block of its own."""

    @abstractmethod
    def take(self, measure: Measure, limit: int) -> Step | None:
        """Cut a head that fits off the front of the rest: ``(head, gap)``, ``gap`` being the
        plain text dropped between the head and the new rest. ``None`` when the rest cannot
        be cut that small (the cursor may have changed then: the caller gives it up)."""

    @abstractmethod
    def starts_blank(self) -> bool:
        """Whether the rest's plain text starts with an empty line (a list item indents only
        the lines that show something)."""


def last_fitting(count: int, fits: Callable[[int], bool], guess: int = 0) -> int:
    """The largest ``i`` in ``range(count)`` with ``fits(i)``, or -1 when ``fits(0)`` is false.

    Gallops from ``guess`` (up when it fits, down when it does not), then bisects, so the
    cost follows the distance from the guess to the answer rather than ``count``.
    ``fits`` is expected to be (nearly) monotone; the answer always is an index for which
    it returned true.
    """
    if count <= 0:
        return -1
    guess = min(max(guess, 0), count - 1)
    step = 1
    if fits(guess):
        low, high = guess, count
        while low + step < count:
            if not fits(low + step):
                high = low + step
                break
            low += step
            step *= 2
    else:
        high = guess
        while True:
            if high == 0:
                return -1
            probe = max(high - step, 0)
            if fits(probe):
                low = probe
                break
            high = probe
            step *= 2
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


class Whole(Cursor):
    """A block that is never cut (a rule)."""

    def __init__(self, block: Block) -> None:
        self.block = block

    def bound(self, cap: float) -> int:
        return lower_bound(self.block, cap)

    def rest(self) -> Block:
        return self.block

    def take(self, measure: Measure, limit: int) -> Step | None:
        return None

    def starts_blank(self) -> bool:
        return False


def suffix_sums(sizes: list[int]) -> list[int]:
    """``out[i] == sum(sizes[i:])``, with ``out[len(sizes)] == 0``."""
    out = [0] * (len(sizes) + 1)
    for i in range(len(sizes) - 1, -1, -1):
        out[i] = out[i + 1] + sizes[i]
    return out


def longest_head(head_size: Callable[[Cut], int], limit: int, first: int, bound: int, guess: int) -> int:
    """Where the longest head that fits ends, after ``first`` and by ``bound`` (-1 when
    none does), searched from ``first + guess`` (the previous message's length, as a rule
    close to this one's)."""
    p = last_fitting(bound - first, lambda i: head_size((first + i + 1,) * 2) <= limit, guess - 1)
    return -1 if p < 0 else first + p + 1


def best_cut(
    levels: Sequence[Finder],
    head_size: Callable[[Cut], int],
    limit: int,
    hard: Callable[[int], int],
    first: int,
    reach: int,
    skip: Callable[[int], int],
) -> Cut | None:
    """The cut at the coarsest level that fills at least half the limit, else the fullest.
    Heads end after ``first`` (the first visible character) and by ``reach``, where the
    longest head that fits ends (:func:`longest_head`); each level's cut is its last
    boundary within that head, so a cut costs a few renders of heads, however many
    boundaries there are. ``hard`` moves a cut anywhere off a grapheme boundary; ``skip``
    gives the end of the whitespace after it, which the cut drops so the rest does not
    start with it."""
    best: Cut | None = None
    best_size = -1
    for find in levels:
        cut = find(reach)
        if cut is None:
            continue
        size = head_size(cut)
        if size > limit:  # a shorter head can show more markup (a link cut in two)
            continue
        if size * 2 >= limit:
            return cut
        if size > best_size:
            best, best_size = cut, size
    # Anywhere: at ``reach``, moved off a grapheme boundary when that still fits.
    position = hard(reach)
    if position != reach and (position <= first or head_size((position, position)) > limit):
        position = reach
    if head_size((position, position)) > best_size:
        return position, skip(position)
    return best
