"""Security headers on every response the HTTP server sends, errors and streams included.

Set through ``on_response_prepare`` rather than a middleware so that responses aiohttp makes
itself (404, 405, 413) and streamed ones get them too. A feature that needs a different value
for one header (an embeddable widget's ``frame-ancestors``) sets it on its response; these are
only defaults.
"""

from __future__ import annotations

from aiohttp import web

__all__ = ["SECURITY_HEADERS", "install_security_headers"]

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


async def _add_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


def install_security_headers(app: web.Application) -> None:
    app.on_response_prepare.append(_add_headers)
