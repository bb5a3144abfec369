"""Markdown rendering: parse, then render and chunk 10 KB of mixed Markdown per platform.

Targets: rendering to Telegram chunks < 3 ms, to the three chat platforms < 8 ms. The
Markdown parse (markdown-it-py) happens once per reply and is reported on its own, and
end to end (parse + render) as well.

    python -m bench.bench_render [--iterations 300] [--size 10000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from connectors.render import parse, render_document

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


def timed(fn: Callable[[], object], iterations: int) -> list[float]:
    fn()  # warm up
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def report(name: str, times: list[float], target: float | None = None) -> None:
    ordered = sorted(times)
    median = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    verdict = ""
    if target is not None:
        verdict = f"  target < {target:g} ms: {'ok' if median < target else 'MISSED'}"
    print(f"{name:34} median {median:7.3f} ms   p95 {p95:7.3f} ms{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--size", type=int, default=10_000)
    args = parser.parse_args()

    markdown = sample(args.size)
    document = parse(markdown)
    chunks = {p: render_document(document, p) for p in ("telegram", "slack", "discord")}
    print(
        f"input: {len(markdown)} characters; chunks: " + ", ".join(f"{p} {len(c)}" for p, c in chunks.items())
    )
    print(f"{args.iterations} iterations each\n")

    report("parse (markdown-it-py)", timed(lambda: parse(markdown), args.iterations))
    report(
        "render telegram (parsed doc)",
        timed(lambda: render_document(document, "telegram"), args.iterations),
        3,
    )
    report("render slack (parsed doc)", timed(lambda: render_document(document, "slack"), args.iterations))
    report(
        "render discord (parsed doc)", timed(lambda: render_document(document, "discord"), args.iterations)
    )
    report(
        "render all three (parsed doc)",
        timed(
            lambda: [render_document(document, p) for p in ("telegram", "slack", "discord")],
            args.iterations,
        ),
        8,
    )
    report(
        "parse + telegram",
        timed(lambda: render_document(parse(markdown), "telegram"), args.iterations),
    )
    report(
        "parse once + all three",
        timed(
            lambda: [
                render_document(d, p) for d in [parse(markdown)] for p in ("telegram", "slack", "discord")
            ],
            args.iterations,
        ),
    )


if __name__ == "__main__":
    main()
