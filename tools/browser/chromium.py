"""Which Chromium the browser tools drive, and how it is started.

Playwright (the pip package) drives the system's Chromium through ``executable_path``; its own
browser downloads (``playwright install``) are never needed and never attempted. The
executable is ``browser.executable`` from talon.yaml (a path or a command name), else the first
of :data:`CANDIDATES` on ``PATH``. Where none is found the browser tools are not offered and
``talon doctor`` says how to install one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.chromium import CANDIDATES, INSTALL_HINT, browser_problem, find_chromium

if TYPE_CHECKING:
    from gateway.browser_settings import BrowserSettings
    from gateway.config import Settings

__all__ = [
    "CANDIDATES",
    "CONFINED_ARGUMENTS",
    "INSTALL_HINT",
    "browser_available",
    "browser_problem",
    "chromium_environment",
    "find_chromium",
    "sandbox_enabled",
]

# Chromium must not reach the network around the guard: no QUIC (UDP), no WebRTC UDP outside
# the proxy, no DNS prefetching, no background services that phone home.
CONFINED_ARGUMENTS = (
    "--disable-quic",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--dns-prefetch-disable",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-first-run",
    "--no-pings",
    "--metrics-recording-only",
    "--disable-breakpad",
)


def browser_available(settings: Settings) -> bool:
    """Whether the browser tools are offered (the listing asks this)."""
    return browser_problem(settings.browser) is None


def sandbox_enabled(settings: BrowserSettings) -> bool:
    """Whether Chromium's own sandbox is on (``browser.sandbox``).

    It cannot start as root, so ``auto`` turns it off only then: the page is still confined by
    the egress guard, but a renderer exploit would run with the daemon's rights, so run the
    daemon as a normal user where you can (Playwright passes ``--no-sandbox`` when it is off).
    """
    if settings.sandbox == "auto":
        return os.geteuid() != 0
    return settings.sandbox == "on"


def chromium_environment(home: Path) -> dict[str, str]:
    """Chromium's whole environment: the daemon's holds bot tokens and API keys, this does not."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
    }
    return env
