"""The browser tools (``browser.use``): a confined headless Chromium, one session per thread."""

from __future__ import annotations

from tools.base import HostTool
from tools.browser.act import ACT
from tools.browser.capture import CLOSE, SCREENSHOT
from tools.browser.open_observe import OBSERVE, OPEN

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (OPEN, OBSERVE, ACT, SCREENSHOT, CLOSE)
