"""``browser:`` in talon.yaml: the confined headless Chromium behind the browser tools."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.model_types import StrictModel

__all__ = ["BrowserSettings"]


class BrowserSettings(StrictModel):
    executable: str | None = Field(
        None,
        description="Chromium to drive: a path or a command name; null = the first of chromium, "
        "chromium-headless-shell, chromium-browser on PATH (Debian: apt-get install chromium)",
    )
    sandbox: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Chromium's own sandbox; auto = on, except as root, where Chromium cannot start it",
    )
    keep_warm: bool = Field(
        True,
        description="start Chromium in the background when the daemon starts (if a persona holds "
        "browser.use) and keep one blank tab ready for the next thread's first browser_open; "
        "false = start it at the first browser call",
    )
    idle_timeout_seconds: float = Field(
        300.0,
        gt=0,
        description="a thread's browser session (cookies, pages) is closed after this long unused",
    )
    max_contexts: int = Field(
        4,
        ge=1,
        le=64,
        description="browser sessions open at once; past it the least recently used idle one closes",
    )
    max_pages: int = Field(
        8, ge=1, le=256, description="tabs open at once across all sessions; a popup past it is closed"
    )
    viewport_width: int = Field(1280, ge=320, le=3840, description="viewport width in CSS pixels")
    viewport_height: int = Field(720, ge=240, le=2160, description="viewport height in CSS pixels")
    max_download_bytes: int = Field(
        50_000_000, ge=1, description="a download larger than this is discarded instead of saved"
    )
