"""Link addresses: normalized and vetted the way markdown-it does it, and made readable.

The parser hands over a link's destination as written (escapes and entities decoded).
:func:`normalize_link` percent-encodes it and gives an international host its ASCII form;
:func:`is_allowed_link` refuses script, file and data addresses, which stay literal text.
"""

from __future__ import annotations

import re

import mdurl

_ESCAPED_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_KEEP_ENCODED = frozenset(";/?:@&=+$,#%")  # decoding these would change what the address says

# An address normalization leaves as it is: characters the encoder keeps (and valid
# escapes), and a host the URL parser takes apart and puts together again unchanged.
_UNCHANGED = re.compile(
    r"(?:[A-Za-z][A-Za-z0-9+.-]*:)?+(?://)?+"  # scheme, slashes
    r"(?:[A-Za-z0-9_.~-]+@)?"  # user
    r"(?P<host>(?:[A-Za-z0-9_-]{0,63}\.)*[A-Za-z0-9_-]{0,63})(?::[0-9]+)?"
    r"(?:[/?#][A-Za-z0-9;/?:@&=+$,\-_.!~*'()#%]*)?"
)
_BAD_ESCAPE = re.compile("%(?![0-9A-Fa-f]{2})")
_MAX_HOST = 255  # the URL parser drops a longer host
_RECODE_HOST_FOR = ("http:", "https:", "mailto:")  # other schemes may not have a host at all
_LABEL_SEPARATOR = re.compile("[.\u3002\uff0e\uff61]")
_NOT_ASCII = re.compile("[^\x00-\x7e]")
_UNSAFE = re.compile("(?:vbscript|javascript|file|data):")
_SAFE_DATA = re.compile("data:image/(?:gif|png|jpeg|webp);")


def normalize_link(url: str) -> str:
    """``url`` as markdown-it normalizes a link destination: characters outside the URL
    syntax percent-encoded (escapes already there kept), and the host of a web or mail
    address in its ASCII form (``https://bücher.de/ä`` -> ``https://xn--bcher-kva.de/%C3%A4``)."""
    unchanged = _UNCHANGED.fullmatch(url)
    if (
        unchanged is not None
        and len(unchanged.group("host")) <= _MAX_HOST
        and ("%" not in url or _BAD_ESCAPE.search(url) is None)
    ):
        return url  # the common case, without the slow URL parser
    parsed = mdurl.parse(url, slashes_denote_host=True)
    if parsed.hostname and (not parsed.protocol or parsed.protocol in _RECODE_HOST_FOR):
        parsed = parsed._replace(hostname=_ascii_host(parsed.hostname))
    if not parsed.hostname or ":" not in parsed.hostname:
        return mdurl.encode(mdurl.format(parsed))
    # An IPv6 host: each part is encoded before format() adds the brackets.
    return mdurl.format(
        parsed._replace(
            protocol=parsed.protocol and mdurl.encode(parsed.protocol),
            auth=parsed.auth and mdurl.encode(parsed.auth),
            hostname=mdurl.encode(parsed.hostname),
            pathname=parsed.pathname and mdurl.encode(parsed.pathname),
            search=parsed.search and mdurl.encode(parsed.search),
            hash=parsed.hash and mdurl.encode(parsed.hash),
        )
    )


def _ascii_host(host: str) -> str:
    return ".".join(
        "xn--" + label.encode("punycode").decode("ascii") if _NOT_ASCII.search(label) else label
        for label in _LABEL_SEPARATOR.split(host)
    )


def is_allowed_link(url: str) -> bool:
    """Whether a normalized address may be a link: not ``javascript:``, ``vbscript:``,
    ``file:`` or ``data:`` (images in ``data:`` aside), as markdown-it decides."""
    url = url.strip().lower()
    return not _UNSAFE.match(url) or _SAFE_DATA.match(url) is not None


def readable_url(url: str) -> str:
    """``url`` with its percent-escapes decoded, except those of characters that would change
    what the address means (``/``, ``?``, ``%`` and the like)."""
    return _ESCAPED_RUN.sub(_decode_escapes, url) if "%" in url else url


def _decode_escapes(match: re.Match[str]) -> str:
    text = bytes.fromhex(match.group().replace("%", "")).decode("utf-8", "replace")
    return "".join(f"%{ord(c):02X}" if c in _KEEP_ENCODED else c for c in text)
