"""What a photo a user sent costs the turn that shows it: reading the file from the thread's
workspace, walking its container (kind, dimensions, CRCs) and base64-encoding it, per image,
for a 300 KB and a 3 MB PNG of noise (nothing compresses them), the cap's size.

python -m bench.bench_images [--rounds 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import tempfile
import time
import zlib
from pathlib import Path

from gateway.runtime.inbound_images import transcript_images
from gateway.store.messages import MessageRow


def _noise_png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + os.urandom(width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 0))
        + chunk(b"IEND", b"")
    )


def _measure(workspace: Path, data: bytes, rounds: int) -> list[float]:
    folder = workspace / "inbox" / "1"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "photo.png").write_bytes(data)
    entry = [{"name": "photo.png", "path": "/workspace/inbox/1/photo.png", "mime_type": "image/png"}]
    row = MessageRow(1, "user", "Ann", "look", json.dumps(entry), None)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        (shown,) = transcript_images([row], workspace, vision=True).values()
        times.append((time.perf_counter() - start) * 1000)
        assert len(shown.blocks) == 1, shown.notes
    return times


def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for label, (w, h) in (("300 KB", (320, 310)), ("3 MB", (1000, 1000))):
            data = _noise_png(w, h)
            times = sorted(_measure(Path(tmp), data, rounds))
            p50, p90 = statistics.median(times), times[int(len(times) * 0.9)]
            print(f"{label} PNG ({len(data):,} bytes): p50 {p50:.2f} ms, p90 {p90:.2f} ms per image")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    main(parser.parse_args().rounds)
