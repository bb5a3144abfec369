"""extract_document: Office files, PDFs and zips made here, extracted; bombs and escapes refused."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import docx
import openpyxl
import pptx
import pytest

from gateway import documents
from tests.fakes.pdf_maker import make_pdf
from tools.base import ToolContext, ToolError
from tools.workspace.extract_document import TOOL


async def extract(ctx: ToolContext, path: str) -> dict:
    return await TOOL.handler(ctx, {"file_path": path})


def _docx(path: Path) -> None:
    document = docx.Document()
    document.add_paragraph("Quarterly report: revenue grew 12%.")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "region", "north"
    document.save(path)


def _xlsx(path: Path) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Sales"
    sheet.append(["month", "units"])
    sheet.append(["March", 42])
    book.save(path)


def _pptx(path: Path) -> None:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Roadmap"
    slide.placeholders[1].text = "Ship the sandbox"
    deck.save(path)


async def test_office_files_are_extracted(ctx: ToolContext, workspace: Path) -> None:
    _docx(workspace / "report.docx")
    _xlsx(workspace / "sales.xlsx")
    _pptx(workspace / "deck.pptx")
    report = await extract(ctx, "/workspace/report.docx")
    assert (
        report["type"] == "docx"
        and "revenue grew 12%" in report["text"]
        and "region | north" in report["text"]
    )
    sales = await extract(ctx, "sales.xlsx")
    assert "## Sheet: Sales" in sales["text"] and "March\t42" in sales["text"]
    deck = await extract(ctx, "/workspace/deck.pptx")
    assert "## Slide 1" in deck["text"] and "Ship the sandbox" in deck["text"]


async def test_a_pdf_is_extracted(ctx: ToolContext, shared: Path) -> None:
    (shared / "paper.pdf").write_bytes(make_pdf(["First page text", "Second page text"]))
    result = await extract(ctx, "/shared/paper.pdf")
    assert result["type"] == "pdf" and result["parts"] == 2
    assert "First page text" in result["text"] and "Second page text" in result["text"]


async def test_a_zip_is_listed_and_its_documents_extracted(ctx: ToolContext, workspace: Path) -> None:
    inner = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("inside the zip")
    document.save(inner)
    with zipfile.ZipFile(workspace / "bundle.zip", "w") as archive:
        archive.writestr("notes/readme.txt", "plain notes")
        archive.writestr("notes/letter.docx", inner.getvalue())
        archive.writestr("../../etc/evil.txt", "escape")
        archive.writestr("/abs.txt", "absolute")
    result = await extract(ctx, "bundle.zip")
    text = result["text"]
    assert "## notes/readme.txt" in text and "plain notes" in text and "inside the zip" in text
    assert "escape" not in text and "absolute" not in text
    assert text.count("skipped, its path leaves the archive") == 2
    assert not (workspace.parent / "etc").exists()


async def test_a_zip_bomb_is_refused(ctx: ToolContext, workspace: Path) -> None:
    with zipfile.ZipFile(workspace / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("zeros.bin", b"\0" * (documents.MAX_DECOMPRESSED + 1))
    with pytest.raises(ToolError, match="decompresses to 4,194,305 bytes, over the 4,194,304-byte limit"):
        await extract(ctx, "bomb.zip")


def test_a_member_that_lies_about_its_size_is_stopped_at_the_cap() -> None:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.txt", b"a" * (documents.MAX_DECOMPRESSED + 10))
    raw = bytearray(data.getvalue())
    # Declare a tiny size in both headers; the deflate stream still holds 4 MB + 10.
    real = (documents.MAX_DECOMPRESSED + 10).to_bytes(4, "little")
    raw = raw.replace(real, (5).to_bytes(4, "little"))
    with pytest.raises(documents.DocumentError):
        documents.extract(bytes(raw), "zip")


async def test_the_output_is_capped(ctx: ToolContext, workspace: Path) -> None:
    with zipfile.ZipFile(workspace / "big.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("big.txt", "line of text\n" * 60_000)
    result = await extract(ctx, "big.zip")
    assert result["truncated"] is True and len(result["text"].encode()) <= documents.MAX_OUTPUT


async def test_wrong_files_get_a_pointer(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("hello")
    with pytest.raises(ToolError, match="read text files with read_file"):
        await extract(ctx, "notes.txt")
    (workspace / "fake.pdf").write_bytes(b"not a pdf at all")
    with pytest.raises(ToolError, match="not a PDF file"):
        await extract(ctx, "fake.pdf")
    (workspace / "fake.docx").write_bytes(b"PK junk")
    with pytest.raises(ToolError, match="not a valid docx file"):
        await extract(ctx, "fake.docx")
    with pytest.raises(ToolError, match="outside the workspace"):
        await extract(ctx, "/etc/passwd")
