"""Markdown rendering end to end: 10 KB of mixed Markdown in, each platform's chunks out.

Targets (parse included): Telegram chunks < 3 ms; the three chat platforms (parsed once,
as ``render_platforms`` does) < 8 ms, both as medians. Parse alone and rendering an already
parsed document are reported below them as secondary lines.

    python -m bench.bench_render [--iterations 300] [--size 10000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from connectors.render import Platform, parse, render_document, render_markdown, render_platforms

SECTION = """## Step {n}: configure the service

The gateway reads **`talon.yaml`** at start-up and *validates every key* before it
connects anything. A typo such as `chanels:` is reported with its path, so fixing it
takes seconds & never needs a debugger. See [the docs](https://en.wikipedia.org/wiki/YAML_(format))
for the format, or ask in #help. Emoji work too 🦅.

- Install the package with `pip install talon-gateway`.
- Copy the example file and fill in the tokens:
  1. Telegram: create a bot with @BotFather.
  2. Slack: enable *Socket Mode* and add the `chat:write` scope.
- Run `talon doctor` to check ~~everything~~ the configuration.

```python
from talon import load_config

config = load_config("talon.yaml")  # raises with the key path on errors
for channel in config.channels:
    print(channel.name, channel.type)
```

| Setting        | Default | Meaning                       |
|:---------------|--------:|:------------------------------|
| `data_dir`     | `data`  | Where the database lives      |
| `timezone`     | `UTC`   | Used for schedules            |
| `log_level`    | `info`  | One of debug, info, warning   |

> **Note:** tokens in the file are read from the environment when written as
> `${{NAME}}`; keep secrets out of version control.

"""


def sample(size: int) -> str:
    parts: list[str] = []
    n = 1
    while sum(map(len, parts)) < size:
        parts.append(SECTION.format(n=n))
        n += 1
    return "".join(parts)[:size].rsplit("\n\n", 1)[0] + "\n"


def timed(cases: dict[str, Callable[[], object]], iterations: int) -> dict[str, list[float]]:
    """Milliseconds per call of each case. The cases take turns, one call each per round,
    so that a busy spell of the machine falls on all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for fn in cases.values():
        fn()  # warm up
    for _ in range(iterations):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def report(name: str, times: list[float], target: float | None = None) -> None:
    ordered = sorted(times)
    median = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    verdict = ""
    if target is not None:
        verdict = f"  target < {target:g} ms: {'ok' if median < target else 'MISSED'}"
    print(f"  {name:34} median {median:7.3f} ms   p95 {p95:7.3f} ms{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--size", type=int, default=10_000)
    args = parser.parse_args()
    n = args.iterations

    markdown = sample(args.size)
    document = parse(markdown)
    chunks = render_platforms(markdown, CHAT)
    print(
        f"input: {len(markdown)} characters; chunks: " + ", ".join(f"{p} {len(c)}" for p, c in chunks.items())
    )
    print(f"{n} rounds, the cases taking turns\n")

    times = timed(
        {
            "telegram": lambda: render_markdown(markdown, "telegram"),
            "all three": lambda: render_platforms(markdown, CHAT),
            "parse": lambda: parse(markdown),
            "render telegram": lambda: render_document(document, "telegram"),
            "render slack": lambda: render_document(document, "slack"),
            "render discord": lambda: render_document(document, "discord"),
        },
        n,
    )
    print("end to end (parse + render):")
    report("telegram", times["telegram"], 3)
    report("all three, parsed once", times["all three"], 8)
    print("\nparts:")
    report("parse (pulldown-cmark + IR)", times["parse"])
    for platform in CHAT:
        report(f"render {platform} (parsed doc)", times[f"render {platform}"])


CHAT: tuple[Platform, ...] = ("telegram", "slack", "discord")


if __name__ == "__main__":
    main()
