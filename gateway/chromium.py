"""Finding the system's Chromium, for the browser tools and ``talon doctor``.

The executable is ``browser.executable`` from talon.yaml (a path or a command name), else the
first of :data:`CANDIDATES` on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.browser_settings import BrowserSettings

__all__ = ["CANDIDATES", "INSTALL_HINT", "browser_problem", "find_chromium"]

CANDIDATES = ("chromium", "chromium-headless-shell", "chromium-browser")
INSTALL_HINT = (
    "install Chromium (Debian/Ubuntu: apt-get install chromium) or set browser.executable in talon.yaml"
)


def find_chromium(configured: str | None) -> str | None:
    """The Chromium executable to use, or ``None`` when there is none.

    ``configured`` is a path (used if it is an executable file) or a command name looked up on
    ``PATH``; ``None`` tries :data:`CANDIDATES` in order.
    """
    if configured:
        if os.sep in configured:
            path = Path(configured).expanduser()
            return str(path) if path.is_file() and os.access(path, os.X_OK) else None
        return shutil.which(configured)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_problem(settings: BrowserSettings) -> str | None:
    """Why the browser tools cannot run here, with the fix, or ``None``."""
    if find_chromium(settings.executable) is not None:
        return None
    if settings.executable:
        return f"browser.executable {settings.executable!r} is not an executable Chromium; {INSTALL_HINT}"
    return f"no Chromium found on PATH (looked for {', '.join(CANDIDATES)}); {INSTALL_HINT}"
