"""browser_open of a page served from 127.0.0.1, cold and warm.

python -m bench.bench_browser [--cold 5] [--warm 30]

Cold is the first browser_open of a daemon: Playwright's driver and Chromium start, the thread's
context and its guard proxy are made, the page loads and is observed. Warm is a browser_open in a
thread whose session is open (navigation, routing through the guard, the pinned proxy, the
observation). Both call the tool's handler in process, as the bridge does.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from gateway.config import NetHttpSettings, Settings
from gateway.personas import Persona
from tests.unit.tools.browser.pages import serve_pages
from tools.base import ToolContext
from tools.browser.manager import close_browser
from tools.browser.open_observe import OPEN


def _p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def _context(root: Path) -> ToolContext:
    persona = Persona(
        name="bench", provider="x", model="m", description=None,
        capabilities=("browser.use",), system_prompt="", path=root,
    )  # fmt: skip
    settings = Settings(config_dir=root, net_http=NetHttpSettings(allowed_private_hosts=["127.0.0.1"]))
    return ToolContext(thread_id=1, persona=persona, db=None, settings=settings)  # type: ignore[arg-type]


async def main(cold_runs: int, warm_runs: int) -> None:
    cold: list[float] = []
    warm: list[float] = []
    async with serve_pages() as pages:
        url = pages.url("/")
        for n in range(cold_runs):
            with tempfile.TemporaryDirectory() as tmp:
                ctx = _context(Path(tmp))
                started = time.perf_counter()
                await OPEN.handler(ctx, {"url": url})
                cold.append((time.perf_counter() - started) * 1000)
                if n == cold_runs - 1:
                    for _ in range(warm_runs):
                        started = time.perf_counter()
                        await OPEN.handler(ctx, {"url": url})
                        warm.append((time.perf_counter() - started) * 1000)
                await close_browser(ctx.settings.data_path)
    print(f"browser_open cold: p50 {statistics.median(cold):.0f} ms, max {max(cold):.0f} ms over {cold_runs}")
    print(
        f"browser_open warm: p50 {statistics.median(warm):.1f} ms, p90 {_p(warm, 0.9):.1f} ms, "
        f"max {max(warm):.1f} ms over {warm_runs}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--warm", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main(args.cold, args.warm))
