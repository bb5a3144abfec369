"""A throwaway PostgreSQL server for tests: Debian's binaries, a cluster made with ``initdb`` in
a temporary directory, listening on 127.0.0.1 only, stopped when the test session ends.

Run as root, the server runs as the ``postgres`` user the Debian package creates (PostgreSQL
refuses to run as root). Durability is off (``fsync``, ``synchronous_commit``): a test server
loses nothing that matters when it stops, and the suite runs on two cores.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path

import psycopg

USER = "talon"


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One running cluster; :meth:`new_database` gives each test an empty database."""

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin_dir = bin_dir
        self.root = root
        self.port = _free_port()
        self._names = count(1)

    def _run(self, *argv: str) -> None:
        cmd = [str(self.bin_dir / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        data = self.root / "data"
        self._run("initdb", "-D", str(data), "-A", "trust", "-U", USER, "--no-sync", "-E", "UTF8")
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(data), "-o", options, "-l", str(self.root / "log"), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self, template: str | None = None) -> str:
        """The URL of a new database: empty, or a copy of the database ``template`` (by name,
        which nothing may be connected to)."""
        name = f"t{os.getpid()}_{next(self._names)}"
        copy = f' TEMPLATE "{template}"' if template else ""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{copy}')
        return self.url(name)

    def make_template(self, name: str) -> None:
        """Close the database ``name`` to connections (autovacuum's too), so that copies of it
        need not wait for it to be left."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false')

    def drop_database(self, url: str) -> None:
        """Drop the database at ``url`` (made by :meth:`new_database`), whoever is connected."""
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def running_server() -> Iterator[PgServer | None]:
    """A started server, or None when PostgreSQL is not installed."""
    bin_dir = pg_bin()
    if bin_dir is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="talon-pg-"))
    root.chmod(0o755)
    server = PgServer(bin_dir, root)
    try:
        server.start()
        yield server
    finally:
        try:
            server.stop()
        except (subprocess.SubprocessError, OSError):
            pass  # never started
        shutil.rmtree(root, ignore_errors=True)
