"""Text out of documents: docx, xlsx, pptx, pdf and zip, bounded in memory, output and time.

Used by ``extract_document`` and by intake, which extracts an inbound document when it
arrives so the turn sees the first part of its text. The caller runs :func:`extract` off the
event loop (it parses untrusted files) with a time bound (:func:`extract_bounded`).

Bounds: an Office file or zip may decompress to at most :data:`MAX_DECOMPRESSED` bytes (the
members' declared sizes are checked before anything is read, and reading stops at the cap
whatever they declared); zip member names must stay inside the archive (no absolute paths,
no ``..``) and nothing is written to disk; the text is cut at :data:`MAX_OUTPUT` bytes. PDFs
go through ``pdftotext`` (poppler-utils) when it is installed, else pypdf.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import subprocess
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

from gateway.errors import RefusedError

__all__ = [
    "KINDS",
    "MAX_DECOMPRESSED",
    "MAX_OUTPUT",
    "DocumentError",
    "Extracted",
    "extract",
    "extract_bounded",
    "kind_of",
]

MAX_DECOMPRESSED = 4 * 1024 * 1024
MAX_OUTPUT = 512 * 1024
TIMEOUT = 30.0
KINDS = {".docx": "docx", ".xlsx": "xlsx", ".pptx": "pptx", ".pdf": "pdf", ".zip": "zip"}
_MIME = {
    "application/pdf": "pdf",
    "application/zip": "zip",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
}


class DocumentError(RefusedError):
    """The document cannot be extracted; the message says why and what to do instead."""


@dataclass(frozen=True, slots=True)
class Extracted:
    """A document's text.

    Attributes:
        kind (:obj:`str`): ``docx``, ``xlsx``, ``pptx``, ``pdf`` or ``zip``.
        text (:obj:`str`): The text, at most :data:`MAX_OUTPUT` bytes of UTF-8.
        truncated (:obj:`bool`): The text was cut.
        pages (:obj:`int` | :obj:`None`): Pages, sheets, slides or members, where known.
    """

    kind: str
    text: str
    truncated: bool
    pages: int | None = None


def kind_of(name: str, mime_type: str | None = None) -> str | None:
    """The document kind of a file by its name (or MIME type), or None when it is not one."""
    suffix = PurePosixPath(name.lower()).suffix
    return KINDS.get(suffix) or _MIME.get((mime_type or "").split(";")[0].strip().lower())


def extract(data: bytes, kind: str) -> Extracted:
    """Extract ``data`` as ``kind`` (blocking: run it in a thread).

    Raises:
        :class:`DocumentError`: The file is not a valid document of that kind, or is too big
            once decompressed.
    """
    handler = _HANDLERS.get(kind)
    if handler is None:
        raise DocumentError(
            f"{kind!r} is not a supported document type; send .docx, .xlsx, .pptx, .pdf or .zip"
        )
    if kind != "pdf":
        _check_zip(data, kind)
    try:
        text, pages = handler(data)
    except DocumentError:
        raise
    except Exception as exc:
        raise DocumentError(
            f"this is not a readable {kind} file ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    return _cut(kind, text, pages)


async def extract_bounded(data: bytes, kind: str, timeout: float = TIMEOUT) -> Extracted:
    """:func:`extract` in a worker thread, given up after ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            return await asyncio.to_thread(extract, data, kind)
    except TimeoutError:
        raise DocumentError(
            f"extracting this {kind} took longer than {timeout:g} s; it was given up"
        ) from None


def _cut(kind: str, text: str, pages: int | None) -> Extracted:
    raw = text.encode("utf-8", errors="replace")
    if len(raw) <= MAX_OUTPUT:
        return Extracted(kind, text, False, pages)
    return Extracted(kind, raw[:MAX_OUTPUT].decode("utf-8", errors="ignore"), True, pages)


# ---------------------------------------------------------------- zip containers


def _check_zip(data: bytes, kind: str) -> int:
    """The declared decompressed size of a zip container, refused over the limit."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise DocumentError(f"this is not a valid {kind} file (not a zip container)") from None
    total = sum(info.file_size for info in archive.infolist())
    if total > MAX_DECOMPRESSED:
        raise DocumentError(
            f"this {kind} decompresses to {total:,} bytes, over the {MAX_DECOMPRESSED:,}-byte limit; "
            "ask for a smaller file or for its text"
        )
    return total


class _Budget:
    """Decompressed bytes left for one document, whatever its members declare."""

    def __init__(self) -> None:
        self.left = MAX_DECOMPRESSED

    def read(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
        with archive.open(info) as member:
            data = member.read(self.left + 1)
        self.charge(len(data))
        return data

    def charge(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise DocumentError(
                f"the archive decompresses to more than {MAX_DECOMPRESSED:,} bytes; it was given up"
            )


def _safe_name(name: str) -> str | None:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        return None
    return str(path)


def _zip(data: bytes) -> tuple[str, int]:
    archive = zipfile.ZipFile(io.BytesIO(data))
    budget = _Budget()
    lines: list[str] = []
    members = archive.infolist()
    for info in members:
        name = _safe_name(info.filename)
        if name is None:
            lines.append(f"## {info.filename!r}: skipped, its path leaves the archive")
            continue
        if info.is_dir():
            continue
        kind = kind_of(name)
        body = budget.read(archive, info)
        if kind and kind != "zip":
            # A document inside counts with what it decompresses to.
            if kind != "pdf":
                budget.charge(_check_zip(body, kind))
            text = extract(body, kind).text
        else:
            text = _as_text(body)
        lines.append(f"## {name} ({info.file_size:,} bytes)\n{text if text is not None else '[binary]'}")
    return "\n\n".join(lines), len(members)


def _as_text(data: bytes) -> str | None:
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# ---------------------------------------------------------------- Office formats


def _docx(data: bytes) -> tuple[str, int | None]:
    import docx

    document = docx.Document(io.BytesIO(data))
    parts = [p.text for p in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            parts.append(" | ".join(cell.text for cell in row.cells))
    return "\n".join(parts), None


def _xlsx(data: bytes) -> tuple[str, int]:
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    out: list[str] = []
    size = 0
    for sheet in book.worksheets:
        out.append(f"## Sheet: {sheet.title}")
        for row in sheet.iter_rows(values_only=True):
            line = "\t".join("" if v is None else str(v) for v in row).rstrip("\t")
            out.append(line)
            size += len(line) + 1
            if size > MAX_OUTPUT:
                return "\n".join(out), len(book.worksheets)
    return "\n".join(out), len(book.worksheets)


def _pptx(data: bytes) -> tuple[str, int]:
    import pptx

    deck = pptx.Presentation(io.BytesIO(data))
    out: list[str] = []
    for number, slide in enumerate(deck.slides, 1):
        out.append(f"## Slide {number}")
        for shape in slide.shapes:
            if shape.has_text_frame:
                out.append(shape.text_frame.text)
    return "\n".join(out), len(deck.slides)


# ---------------------------------------------------------------- PDF


def _pdf(data: bytes) -> tuple[str, int | None]:
    if not data.startswith(b"%PDF"):
        raise DocumentError("this is not a PDF file (it does not start with %PDF)")
    tool = shutil.which("pdftotext")
    if tool is not None:
        return _pdftotext(tool, data)
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(data))
    out: list[str] = []
    size = 0
    for page in reader.pages:
        text = page.extract_text() or ""
        out.append(text)
        size += len(text)
        if size > MAX_OUTPUT:
            break
    return "\n\f".join(out), len(reader.pages)


def _pdftotext(tool: str, data: bytes) -> tuple[str, int | None]:
    """pdftotext reading stdin; its output read up to the cap, then it is stopped."""
    limits = (
        ["prlimit", f"--as={2 * 1024**3}", f"--cpu={int(TIMEOUT)}", "--"] if shutil.which("prlimit") else []
    )
    proc = subprocess.Popen(
        [*limits, tool, "-layout", "-enc", "UTF-8", "-", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    feeder = threading.Thread(target=_feed, args=(proc.stdin, data), daemon=True)
    feeder.start()
    try:
        out = proc.stdout.read(MAX_OUTPUT + 4)
        complete = proc.stdout.read(1) == b""
        if not complete:
            proc.kill()
        errors = proc.stderr.read(4096)
        code = proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        feeder.join(1)
        for stream in (proc.stdout, proc.stderr):
            stream.close()
    if complete and code != 0:
        detail = errors.decode(errors="replace").strip().splitlines()[-1:] or ["no detail"]
        raise DocumentError(f"pdftotext could not read this PDF: {detail[0][:200]}")
    text = out.decode("utf-8", errors="replace")
    return text, text.count("\f") or None


def _feed(stdin: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(OSError):
        stdin.write(data)
    with contextlib.suppress(OSError):
        stdin.close()


_HANDLERS: dict[str, Callable[[bytes], tuple[str, int | None]]] = {
    "docx": _docx,
    "xlsx": _xlsx,
    "pptx": _pptx,
    "pdf": _pdf,
    "zip": _zip,
}
