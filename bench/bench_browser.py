"""browser_open of a page served from 127.0.0.1: a thread's first call, and later calls.

python -m bench.bench_browser [--threads 5] [--warm 30] [--daemons 3]

As deployed, the daemon starts Chromium and one spare tab in the background when it starts
(``browser.keep_warm``, the default) whenever a persona holds ``browser.use``. So:

- **cold** is a thread's first ``browser_open`` once the daemon is up: the thread's session is
  made (it takes the spare tab; a new spare is made in the background), the page loads
  through the guard and is observed. Threads are opened one after another, a second apart.
- **warm** is a ``browser_open`` in a thread whose session is open (navigation, routing through
  the guard, the pinned proxy, the observation).
- **daemon-cold** is the first call of a daemon with ``keep_warm: false``: Playwright's driver
  and Chromium start inside the call.

All call the tool's handler in process, as the bridge does.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from gateway.browser_settings import BrowserSettings
from gateway.config import NetHttpSettings, Settings
from gateway.personas import Persona
from tests.unit.tools.browser.pages import serve_pages
from tools.base import ToolContext
from tools.browser.manager import close_browser, warm_browser
from tools.browser.open_observe import OPEN


def _p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def _context(root: Path, thread_id: int = 1, *, keep_warm: bool = True) -> ToolContext:
    persona = Persona(
        name="bench", provider="x", model="m", description=None,
        capabilities=("browser.use",), system_prompt="", path=root,
    )  # fmt: skip
    settings = Settings(
        config_dir=root,
        net_http=NetHttpSettings(allowed_private_hosts=["127.0.0.1"]),
        browser=BrowserSettings(keep_warm=keep_warm),
    )
    return ToolContext(thread_id=thread_id, persona=persona, db=None, settings=settings)  # type: ignore[arg-type]


async def _timed(ctx: ToolContext, url: str) -> float:
    started = time.perf_counter()
    result = await OPEN.handler(ctx, {"url": url})
    elapsed = (time.perf_counter() - started) * 1000
    assert result.value["title"] == "Counter", result.value
    return elapsed


async def main(threads: int, warm_runs: int, daemons: int) -> None:
    cold: list[float] = []
    warm: list[float] = []
    daemon_cold: list[float] = []
    async with serve_pages() as pages:
        url = pages.url("/")
        with tempfile.TemporaryDirectory() as tmp:
            first = _context(Path(tmp))
            await warm_browser(first.settings, {"bench": first.persona})  # the daemon's start
            for n in range(1, threads + 1):
                await asyncio.sleep(1.0)
                ctx = _context(Path(tmp), n)
                cold.append(await _timed(ctx, url))
                if n == 1:
                    for _ in range(warm_runs):
                        warm.append(await _timed(ctx, url))
            await close_browser(first.settings.data_path)
        for _ in range(daemons):
            with tempfile.TemporaryDirectory() as tmp:
                ctx = _context(Path(tmp), keep_warm=False)
                daemon_cold.append(await _timed(ctx, url))
                await close_browser(ctx.settings.data_path)
    print(
        f"browser_open cold (a thread's first, daemon up): p50 {statistics.median(cold):.0f} ms, "
        f"max {max(cold):.0f} ms over {threads} threads ({', '.join(f'{t:.0f}' for t in cold)})"
    )
    print(
        f"browser_open warm: p50 {statistics.median(warm):.1f} ms, p90 {_p(warm, 0.9):.1f} ms, "
        f"max {max(warm):.1f} ms over {warm_runs}"
    )
    if daemon_cold:
        print(
            f"browser_open daemon-cold (keep_warm false): p50 {statistics.median(daemon_cold):.0f} ms, "
            f"max {max(daemon_cold):.0f} ms over {daemons}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=5)
    parser.add_argument("--warm", type=int, default=30)
    parser.add_argument("--daemons", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.threads, args.warm, args.daemons))
