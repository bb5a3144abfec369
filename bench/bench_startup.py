"""`talon run` readiness time and idle memory.

Starts the real command on a fresh `talon init` config (console channel, embedded
defaults), measures the time until the control socket answers and the CPU the process spent
to get there (user + system; steadier than the wall time on a shared machine), then the
process's resident memory after it has idled.

    python -m bench.bench_startup [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from gateway.control_client import ControlClient, DaemonNotRunningError
from tests.e2e.daemon import TALON, talon, talon_env


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_run(root: Path, idle: float) -> tuple[float, float, float]:
    env = talon_env({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "TALON_MODEL": "local:x"})
    config = root / "talon.yaml"
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *TALON,
        "run",
        "-c",
        str(config),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                async with ControlClient(root / "data") as client:
                    await client.call({"op": "ping"})
                break
            except (DaemonNotRunningError, ConnectionError, OSError):
                await asyncio.sleep(0.005)
        ready = time.perf_counter() - started
        cpu = cpu_seconds(proc.pid)
        await asyncio.sleep(idle)
        return ready, cpu, rss_mb(proc.pid)
    finally:
        proc.terminate()
        await proc.wait()


async def run(runs: int, idle: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bot"
        code, _, err = await talon("init", str(root))
        assert code == 0, err
        results = [await one_run(root, idle) for _ in range(runs)]
    ready = [r for r, _, _ in results]
    cpu = [c for _, c, _ in results]
    rss = [m for _, _, m in results]
    print(f"talon run, {runs} runs (console channel, fresh init config)")
    print(f"  ready  median {statistics.median(ready) * 1000:.0f} ms, max {max(ready) * 1000:.0f} ms")
    print(f"  CPU to ready  median {statistics.median(cpu) * 1000:.0f} ms, max {max(cpu) * 1000:.0f} ms")
    print(f"  idle RSS after {idle:g}s  median {statistics.median(rss):.1f} MB, max {max(rss):.1f} MB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--idle", type=float, default=3.0)
    args = ap.parse_args()
    asyncio.run(run(args.runs, args.idle))


if __name__ == "__main__":
    main()
