"""systemd's notify protocol: READY when the daemon is ready, WATCHDOG pings, STOPPING.

A ``Type=notify`` unit passes ``$NOTIFY_SOCKET`` (a Unix datagram socket, ``@`` for the
abstract namespace); with ``WatchdogSec=`` it also passes ``$WATCHDOG_USEC`` (and
``$WATCHDOG_PID``, the process meant). The pings come from a task on the daemon's own
event loop, so a loop that blocks stops them and systemd restarts the daemon; a thread
would go on pinging a hung gateway. Outside systemd nothing is sent. Sending never raises:
a lost datagram only means systemd may restart a daemon it thinks is hung.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Mapping

__all__ = ["SystemdNotifier"]

log = logging.getLogger("talon.watchdog")

# systemd restarts the unit when no ping arrived for WatchdogSec; pinging at half of it
# leaves a whole interval of slack for a busy (not blocked) loop.
_PINGS_PER_INTERVAL = 2


class SystemdNotifier:
    """Sends notify-protocol states to the socket systemd named.

    Args:
        address (:obj:`str`): ``$NOTIFY_SOCKET``: a path, or ``@name`` for an abstract socket.
        watchdog_seconds (:obj:`float` | :obj:`None`): ``$WATCHDOG_USEC`` in seconds, when
            systemd expects pings from this process.
    """

    def __init__(self, address: str, watchdog_seconds: float | None = None):
        self.address = "\0" + address[1:] if address.startswith("@") else address
        self.watchdog_seconds = watchdog_seconds
        self._warned = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> SystemdNotifier | None:
        """The notifier systemd asked for, or None outside a ``Type=notify`` unit."""
        address = environ.get("NOTIFY_SOCKET", "")
        if not address:
            return None
        return cls(address, _watchdog_seconds(environ))

    def notify(self, state: str) -> bool:
        """Send one state (``READY=1``, ``WATCHDOG=1``, ``STOPPING=1``, ``STATUS=...``)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(state.encode("utf-8", "replace"), self.address)
            return True
        except OSError as exc:
            if not self._warned:  # once: a missing socket would otherwise log every ping
                self._warned = True
                log.warning("systemd notify socket %s refused %s: %s", self.address, state.split("=")[0], exc)
            return False

    async def ping_forever(self) -> None:
        """Send WATCHDOG=1 at half the watchdog interval until cancelled; returns at once
        when systemd set no watchdog."""
        if not self.watchdog_seconds:
            return
        interval = self.watchdog_seconds / _PINGS_PER_INTERVAL
        while True:
            self.notify("WATCHDOG=1")
            await asyncio.sleep(interval)


def _watchdog_seconds(environ: Mapping[str, str]) -> float | None:
    pid = environ.get("WATCHDOG_PID", "")
    if pid and pid != str(os.getpid()):
        return None  # the watchdog is meant for another process of the unit
    try:
        usec = int(environ.get("WATCHDOG_USEC", "0"))
    except ValueError:
        log.warning("WATCHDOG_USEC=%r is not a number of microseconds; not pinging", environ["WATCHDOG_USEC"])
        return None
    return usec / 1_000_000 if usec > 0 else None
