"""A throwaway PostgreSQL server for tests: Debian's binaries, a cluster made with ``initdb`` in
a temporary directory, listening on 127.0.0.1 only, stopped when the test session ends.

Run as root, the server runs as the ``postgres`` user the Debian package creates (PostgreSQL
refuses to run as root). Durability is off (``fsync``, ``synchronous_commit``): a test server
loses nothing that matters when it stops, and the suite runs on two cores.

The test suite's cluster lives in ``/dev/shm`` when that has room (:data:`SHM_NEEDED`): each
new database is a copy of ``template1``, some 8 MB of files, and on this machine's disk a
worker's few hundred took 0.1-0.3 s each to create and 12 s to remove at the end of the
session, against 0.04 s and 2 s in memory. Benchmarks keep theirs on disk, as deployed.
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

from gateway.store.pg_connection import connect
from gateway.store.postgres import apply_migrations

USER = "talon"
SHM_NEEDED = 4 << 30  # bytes free in /dev/shm for a worker's cluster to live there


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cluster_parent() -> str | None:
    """Where the cluster's directory goes: ``/dev/shm`` when it has room, else the temp dir."""
    try:
        shm = os.statvfs("/dev/shm")
    except OSError:
        return None
    free = shm.f_bavail * shm.f_frsize
    return "/dev/shm" if free >= SHM_NEEDED and os.access("/dev/shm", os.W_OK) else None


class PgServer:
    """One running cluster; :meth:`new_database` gives each test an empty database, and
    :meth:`migrated_database` one with Talon's schema."""

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin_dir = bin_dir
        self.root = root
        self.port = _free_port()
        self._names = count(1)
        self._migrated: str | None = None  # the template of migrated_database

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

    def migrated_database(self) -> str:
        """The URL of a new database with Talon's schema at the code's version: a copy of a
        template this server migrated once (migrating each database took 0.1-0.3 s)."""
        if self._migrated is None:
            url = self.new_database()
            conn = connect(url, application_name="talon-tests")
            try:
                apply_migrations(conn)
            finally:
                conn.close()
            name = url.rsplit("/", 1)[1]
            self.make_template(name)
            self._migrated = name
        return self.new_database(template=self._migrated)

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
def running_server(*, in_memory: bool = False) -> Iterator[PgServer | None]:
    """A started server, or None when PostgreSQL is not installed. ``in_memory`` (the test
    suite's): in ``/dev/shm`` when it has room; benchmarks keep the disk, as deployed."""
    bin_dir = pg_bin()
    if bin_dir is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="talon-pg-", dir=_cluster_parent() if in_memory else None))
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
