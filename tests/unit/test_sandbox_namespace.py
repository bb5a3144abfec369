"""NamespaceInit: killing a sandbox's first process ends everything in its PID namespace, and a
pid that is not in the reported namespace is never signalled."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from gateway.sandbox import SandboxSpec, bwrap_arguments, find_bwrap, sandbox_problem
from gateway.sandbox_namespace import NamespaceInit

pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _sleepers(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == f"sleep\0{marker}\0".encode():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _wait_until(condition, seconds: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_killing_the_first_process_ends_every_process_of_the_sandbox(tmp_path: Path) -> None:
    bwrap = find_bwrap()
    assert bwrap is not None
    init = NamespaceInit()
    # Two sleepers that left the shell's session and group: killing bwrap's group would miss
    # them, and bwrap itself is left running, so only the namespace's end can stop them.
    script = "setsid sleep 301 & setsid sleep 301 & wait"
    argv = [
        bwrap,
        *bwrap_arguments(SandboxSpec(mounts=(), cwd="/")),
        *init.arguments(),
        "--",
        "/bin/sh",
        "-c",
        script,
    ]
    proc = subprocess.Popen(argv, pass_fds=(init.child_fd,), start_new_session=True)
    init.started()
    try:
        assert _wait_until(lambda: len(_sleepers("301")) == 2)
        init.kill()
        assert _wait_until(lambda: not _sleepers("301")), "a sandboxed process outlived its namespace"
        assert proc.wait(timeout=10) != 0  # bwrap saw its namespace end
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_pid_outside_the_reported_namespace_is_left_alone() -> None:
    init = NamespaceInit()
    bystander = subprocess.Popen(["sleep", "302"])
    try:
        # What a stale report would say once its pid was reused by a process of the host.
        os.write(init.child_fd, json.dumps({"child-pid": bystander.pid, "pid-namespace": 1}).encode())
        init.started()
        init.kill()
        time.sleep(0.1)
        assert _alive(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()


def test_a_bwrap_that_reported_nothing_is_a_no_op() -> None:
    init = NamespaceInit()
    init.started()
    init.kill()  # nothing written: no error, nothing signalled
    init.close()
