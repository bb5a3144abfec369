"""The sandbox's end of guarded egress: a loopback port that leads to the daemon's egress proxy.

With ``shell.network: guarded`` the sandbox has a network namespace of its own with nothing
in it but loopback. This script, started inside it before the command (standard library
only, run with ``python -I -S``), listens on ``127.0.0.1:<port>``, then forks: the child
carries every connection to the proxy's Unix socket (bound into the sandbox read-only), the
parent becomes the command. ``HTTP_PROXY`` and friends point at the port, so programs that
honour them reach the network only through the guard; programs that do not reach nothing.

Usage: ``egress_forward.py SOCKET PORT -- PROGRAM [ARG ...]``
"""

from __future__ import annotations

import os
import socket
import sys
import threading

MAX_CONNECTIONS = 64
_CHUNK = 64 * 1024


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(_CHUNK):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def _carry(client: socket.socket, path: str, slots: threading.Semaphore) -> None:
    try:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            upstream.close()
            client.close()
            return
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()
        upstream.close()
        client.close()
    finally:
        slots.release()


def serve(listener: socket.socket, path: str) -> None:
    """Accept forever, at most :data:`MAX_CONNECTIONS` at a time."""
    slots = threading.Semaphore(MAX_CONNECTIONS)
    while True:
        client, _ = listener.accept()
        slots.acquire()
        threading.Thread(target=_carry, args=(client, path, slots), daemon=True).start()


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: egress_forward.py SOCKET PORT -- PROGRAM [ARG ...]")
    path, port, program = argv[0], int(argv[1]), argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(MAX_CONNECTIONS)
    # Listening before the fork: the command's first connection never races the forwarder.
    if os.fork() == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        serve(listener, path)
        os._exit(0)
    listener.close()
    os.execv(program[0], program)


if __name__ == "__main__":
    main(sys.argv[1:])
