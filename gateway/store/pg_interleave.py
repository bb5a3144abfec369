"""A group commit's transactions interleaved in its one PostgreSQL transaction.

The members of a group commit (:meth:`gateway.store.db.Database.run_transaction`) run on the
writer's thread one after the other, and on PostgreSQL each one waits on the server every time
it reads a result (:mod:`gateway.store.pg_pipeline`). A group of forty turn leases, six reads
each, waits 240 times in a row while the server and the daemon take turns being idle.

Members that declared a key (:meth:`~gateway.store.db.Database.run_keyed`: their statements
touch the rows of that one thread or chat, besides inserts of new rows and upserts that add to
totals) run instead as greenlets on the writer's thread. When one needs a result that is not in
yet, it parks and the next member runs until it needs one too; once every member waits, the
last to have parked reads its result, the statements of all of them go to the server with that
one wait, and the results before its own are read on the way; each member whose result came
runs on. The group then waits about as often as its longest member. Measured with
``python -m bench.bench_e2e --postgres`` (2026-12-03): under load the writer waits on the server
about once per reply instead of 16 times, and runs alternating with and without it gave
227-279 against 175-265 replies/s with 200 threads (bench/README.md).

A member that parks first pushes what it sent onto the socket (a non-blocking flush), so the
server runs it while the other members run theirs: otherwise the server sat idle while the
writer ran a round, and the writer while the server caught up. With 200 threads the writer's
waits fell from 1.4 to 0.6 s per 1,000 replies, and replies/s rose from 240-283 to 331-387.

What stays as it was:

- Members of one key run one after the other, in the group's order, so the later one sees all
  the earlier one wrote. Members of different keys touch different rows, so the order in
  which their statements reach the server changes nothing either sees.
- A member without a key runs alone: after every member before it ended, before any after it
  starts.
- Every member sees its own writes, and the group still commits or fails whole: the first
  exception ends the other members (:class:`greenlet.GreenletExit` at the point where they
  wait) and reaches :func:`gateway.store.db._run_group` as a sequential member's would.

On SQLite nothing waits on a server, and members run one after the other.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from typing import Any

import greenlet

from gateway.store.db import Member, run_in_order
from gateway.store.pg_pipeline import Sent

__all__ = ["run_interleaved"]


def run_interleaved(conn: Any, members: Sequence[Member]) -> list[Any]:
    """Each member's outcome, in the group's order; consecutive keyed members interleaved.

    Raises:
        Exception: the first exception a member raised (the others are ended first).
    """
    outcomes: list[Any] = []
    start = 0
    while start < len(members):
        end = start
        while end < len(members) and members[end][1] is not None:
            end += 1
        if end - start >= 2:
            outcomes += _Interleaving(conn, members[start:end]).run()
            start = end
        else:
            stop = max(end, start + 1)
            outcomes += run_in_order(conn, members[start:stop])
            start = stop
    return outcomes


class _Interleaving:
    """One run of keyed members (at least two) on the writer's thread."""

    def __init__(self, conn: Any, members: Sequence[Member]) -> None:
        self._conn = conn
        self._members = members
        self._hub = greenlet.getcurrent()
        self._greenlets: list[greenlet.greenlet | None] = [None] * len(members)
        self._outcomes: list[Any] = [None] * len(members)
        self._waiting: dict[int, Sent] = {}  # member -> the result it waits for, in parking order
        self._runnable: deque[int] = deque()
        self._later: dict[Hashable, deque[int]] = {}  # key -> its members not yet started

    def run(self) -> list[Any]:
        for index, (_, key) in enumerate(self._members):
            if key in self._later:
                self._later[key].append(index)
            else:
                self._later[key] = deque()
                self._runnable.append(index)
        self._conn.park = self.park
        try:
            self._loop()
        except BaseException:
            self._end_all()
            raise
        finally:
            self._conn.park = None
        return self._outcomes

    def _loop(self) -> None:
        finished = 0
        while finished < len(self._members):
            if not self._runnable:
                for index, sent in list(self._waiting.items()):
                    if sent.done:  # read along with another member's result
                        del self._waiting[index]
                        self._runnable.append(index)
            if not self._runnable:
                # Every member waits: the last to have parked, whose statement went last, reads;
                # what all of them sent goes to the server with its wait, and every result
                # before its own is read on the way.
                index = next(reversed(self._waiting))
                del self._waiting[index]
                self._runnable.append(index)
            if self._step(self._runnable.popleft()):
                finished += 1

    def _step(self, index: int) -> bool:
        """Run member ``index`` until it waits or ends. True when it ended."""
        glet = self._greenlets[index]
        if glet is None:
            fn = self._members[index][0]
            glet = self._greenlets[index] = greenlet.greenlet(lambda: fn(self._conn))
        outcome = glet.switch()  # a member's exception propagates from here
        if not glet.dead:
            self._waiting[index] = outcome  # the Sent it parked on
            return False
        self._outcomes[index] = outcome
        self._greenlets[index] = None
        following = self._later[self._members[index][1]]
        if following:
            self._runnable.append(following.popleft())
        return True

    def park(self, sent: Sent) -> None:
        """Called in a member that needs ``sent``'s result: back to the hub, which resumes it once
        the result is in, or to read it itself."""
        if greenlet.getcurrent() is not self._hub:
            self._hub.switch(sent)

    def _end_all(self) -> None:
        for glet in self._greenlets:
            if glet is not None and not glet.dead:
                glet.throw(greenlet.GreenletExit)
