"""Link addresses as the parser leaves them, made fit to show and to send."""

from __future__ import annotations

import re

_ESCAPED_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_KEEP_ENCODED = frozenset(";/?:@&=+$,#%")  # decoding these would change what the address says
_WEB_HOST = re.compile(r"(https?://(?:[^/?#@]*@)?)([^/?#:]*)", re.IGNORECASE)


def readable_url(url: str) -> str:
    """``url`` with its percent-escapes decoded, except those of characters that would change
    what the address means (``/``, ``?``, ``%`` and the like)."""
    return _ESCAPED_RUN.sub(_decode_escapes, url) if "%" in url else url


def _decode_escapes(match: re.Match[str]) -> str:
    text = bytes.fromhex(match.group().replace("%", "")).decode("utf-8", "replace")
    return "".join(f"%{ord(c):02X}" if c in _KEEP_ENCODED else c for c in text)


def ascii_web_host(url: str) -> str:
    """A web address whose host the parser percent-encoded (``https://b%C3%BCcher.de``), with
    the host in its ASCII form instead (``https://xn--bcher-kva.de``), as platforms expect."""
    match = _WEB_HOST.match(url) if "%" in url else None
    if match is None or "%" not in match.group(2):
        return url
    labels = [
        label if label.isascii() else "xn--" + label.encode("punycode").decode("ascii")
        for label in readable_url(match.group(2)).split(".")
    ]
    return match.group(1) + ".".join(labels) + url[match.end() :]
