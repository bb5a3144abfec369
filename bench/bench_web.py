"""web_scrape of a 200 KB article served from 127.0.0.1: the whole call, the fetch alone, the
extraction alone.

python -m bench.bench_web [--runs 30]

The whole call is the tool's handler (guard, fetch, decode, extraction in a thread, head-and-tail
cap) against a local aiohttp server in the same process; the fetch alone is ``mode: "raw"`` of the
same page, and the extraction alone is :func:`tools.web.extract.extract_page` on its HTML.
Talon's own time is the whole call less the fetch.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from gateway.config import NetHttpSettings, Settings
from gateway.personas import Persona
from tests.fakes.web_pages import WebSite, article_html
from tools.base import ToolContext
from tools.web.extract import extract_page
from tools.web.web_scrape import web_scrape

_WORDS = (
    "mill tide estuary wheel pond miller grain flour harbour sluice gate ledger owner coast river "
    "stone granite oak beam shaft gear season winter summer village parish market cart road bridge"
).split()


def big_article(target: int = 200_000) -> str:
    """The noisy article page grown to about ``target`` bytes with varied paragraphs."""
    rng = random.Random(7)
    page = article_html()
    paragraphs = []
    size = len(page)
    while size < target:
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(40, 90)))
        paragraph = f"<p>{words.capitalize()}.</p>\n"
        paragraphs.append(paragraph)
        size += len(paragraph)
    return page.replace("</article>", "".join(paragraphs) + "</article>")


def _p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


async def main(runs: int) -> None:
    html = big_article()
    with tempfile.TemporaryDirectory() as tmp:
        persona = Persona(
            name="bench", provider="x", model="m", description=None,
            capabilities=("net.http:egress",), system_prompt="", path=Path(tmp),
        )  # fmt: skip
        settings = Settings(net_http=NetHttpSettings(allowed_private_hosts=["127.0.0.1"]))
        ctx = ToolContext(thread_id=1, persona=persona, db=None, settings=settings)  # type: ignore[arg-type]
        async with WebSite() as site:
            site.page("/article", html)
            url = site.url("/article")
            whole, fetch, extract = [], [], []
            await web_scrape(ctx, {"url": url})  # warm: the first extraction imports trafilatura
            for _ in range(runs):
                started = time.perf_counter()
                result = await web_scrape(ctx, {"url": url})
                whole.append((time.perf_counter() - started) * 1000)
                assert "Tide mills once lined" in result["content"]
                started = time.perf_counter()
                await web_scrape(ctx, {"mode": "raw", "url": url, "max_bytes": 1_000_000})
                fetch.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                extract_page(html, url)
                extract.append((time.perf_counter() - started) * 1000)
    own = [w - f for w, f in zip(whole, fetch, strict=True)]
    print(f"page {len(html.encode()):,} bytes, {runs} runs")
    for name, times in (("web_scrape markdown, whole call", whole), ("fetch alone (raw)", fetch),
                        ("extraction alone", extract), ("Talon's own (whole - fetch)", own)):  # fmt: skip
        print(f"{name}: p50 {statistics.median(times):.1f} ms, p90 {_p(times, 0.9):.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    asyncio.run(main(parser.parse_args().runs))
