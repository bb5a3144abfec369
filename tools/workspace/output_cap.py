"""Bounded command output: the start and the end kept, the middle counted.

A stream keeps its first ``head`` and last ``tail`` bytes however much passes through it, so
a flood costs the daemon a fixed amount of memory; :attr:`HeadTail.total` counts everything
for the extreme-output limit.
"""

from __future__ import annotations

from collections import deque

__all__ = ["HeadTail"]


class HeadTail:
    """The head and tail of a byte stream.

    Args:
        head (:obj:`int`): Bytes kept from the start.
        tail (:obj:`int`): Bytes kept from the end.
    """

    def __init__(self, head: int, tail: int) -> None:
        self._head_cap = head
        self._tail_cap = tail
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data or self._tail_cap <= 0:
            return
        data = data[-self._tail_cap :]
        self._tail.append(data)
        self._tail_len += len(data)
        while self._tail_len - len(self._tail[0]) >= self._tail_cap:
            self._tail_len -= len(self._tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > len(self._head) + self._tail_len or self._tail_len > self._tail_cap

    def parts(self) -> tuple[bytes, bytes]:
        """The kept head and tail; ``total`` minus their lengths were left out between them."""
        tail = b"".join(self._tail)
        if len(tail) > self._tail_cap:
            tail = tail[-self._tail_cap :]
        return bytes(self._head), tail

    def text(self) -> str:
        """The kept bytes as text, with a note where the middle was left out."""
        _, tail = self.parts()
        dropped = self.total - len(self._head) - len(tail)
        head_text = self._head.decode("utf-8", errors="replace")
        if dropped <= 0:
            return head_text + tail.decode("utf-8", errors="replace")
        note = (
            f"\n[... {dropped:,} bytes of output left out; {self.total:,} in all. Filter the output "
            "(grep, head, tail) or write it to a file and read parts of it ...]\n"
        )
        return head_text + note + tail.decode("utf-8", errors="replace")
