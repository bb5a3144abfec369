"""``talon doctor``'s HTTP section: who can reach the server, and who can use what it serves."""

from __future__ import annotations

from gateway.config import Settings

__all__ = ["http_findings"]


def http_findings(settings: Settings) -> list[tuple[str, str]]:
    """``(level, text)`` lines: nothing when the HTTP server is off."""
    http = settings.http
    if http is None:
        return []
    found: list[tuple[str, str]] = []
    if http.loopback:
        found.append(("ok", f"http.listen {http.listen}: reachable from this machine only"))
    else:
        found.append(
            (
                "warn",
                f"http.listen {http.listen}: reachable beyond this machine, in plain HTTP; put a TLS reverse "
                "proxy in front of it and listen on 127.0.0.1 behind it (docs/http.md)",
            )
        )
        if http.metrics and not http.metrics_token:
            found.append(
                (
                    "warn",
                    "http.metrics_token: unset, so anyone who reaches the server reads /metrics; "
                    'set metrics_token: "${TALON_METRICS_TOKEN}"',
                )
            )
    if http.public_url and http.public_url.startswith("http://") and not http.loopback:
        found.append(
            (
                "warn",
                f"http.public_url {http.public_url}: not https, so sign-in and chat cookies are sent in clear; "
                "use the reverse proxy's https:// URL",
            )
        )
    console_users = bool(settings.console and settings.console.users)
    if settings.console is not None and not console_users:
        found.append(
            ("warn", "console.users: empty, so nobody can sign in; add one with `talon users add NAME`")
        )
    for i, ch in enumerate(settings.channels):
        if ch.type == "web" and not ch.sites and not (ch.console_users and console_users):  # type: ignore[union-attr]
            found.append(
                (
                    "warn",
                    f"channels[{i}] ({ch.name}): no sites and no console users, so nobody can open this chat; "
                    "add sites: [{token, origins}] or console.users",
                )
            )
    return found
