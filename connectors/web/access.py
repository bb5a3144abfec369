"""Who may use a web chat: sites by token and origin, visitors by a signed cookie.

A site's token is compared in constant time and never logged or echoed. A browser request
that carries an ``Origin`` must come from an origin some site lists (scripts on other pages
cannot forge it); one without (a same-origin ``GET`` of the chat page) is judged by its
cookie alone. A visitor is a random id signed with the channel's key (HMAC-SHA256), so a
cookie cannot be made up or changed into another visitor's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from gateway.config import WebSite

__all__ = ["KEY_FILE", "SiteAccess", "Visitors", "load_key", "origin_of", "user_chat"]

KEY_FILE = "web-chat.key"
_VISITOR = re.compile(r"^[a-z2-7]{26}$")


def user_chat(user: str) -> str:
    """The chat id of a signed-in console user: never a visitor's (those have no dot), the
    same whatever case they sign in with (console names compare case-insensitively)."""
    return f"user.{user.lower()}"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, as a browser's ``Origin`` header spells it."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def load_key(data_path: Path) -> bytes:
    """The key visitor cookies are signed with: made once, kept owner-only in the data dir
    (a new key would sign every visitor out of their chat)."""
    path = data_path / KEY_FILE
    try:
        key = path.read_bytes()
        if len(key) >= 32:
            return key
    except FileNotFoundError:
        pass
    data_path.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    tmp = path.with_name(path.name + ".part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(path)
    return key


class SiteAccess:
    """The channel's sites: which token and origins may open a chat."""

    def __init__(self, sites: Sequence[WebSite]) -> None:
        self._sites = list(sites)
        self._origins = {origin for site in sites for origin in site.origins}

    def origin_allowed(self, origin: str | None) -> bool:
        """A request without ``Origin`` passes here (its cookie decides); one with must be listed."""
        return origin is None or origin in self._origins

    def site_for(self, token: str | None, origin: str | None) -> bool:
        """Whether ``token`` is a site's and ``origin`` one of that site's (a browser always
        sends ``Origin`` with the posts that carry a token)."""
        if not token or origin is None:
            return False
        wanted = token.encode()
        found = False
        for site in self._sites:  # every site compared, in constant time each
            if hmac.compare_digest(site.token.encode(), wanted) and origin in site.origins:
                found = True
        return found


class Visitors:
    """Anonymous visitor ids in signed cookie values."""

    def __init__(self, channel: str, key: bytes) -> None:
        self._channel = channel
        self._key = key

    def new(self) -> tuple[str, str]:
        """A fresh visitor id and its cookie value."""
        visitor = base64.b32encode(secrets.token_bytes(16)).decode().rstrip("=").lower()
        return visitor, self.cookie(visitor)

    def cookie(self, visitor: str) -> str:
        return f"{visitor}.{self._sign(visitor)}"

    def visitor_of(self, cookie: str | None) -> str | None:
        """The visitor a cookie value names, or None when it is missing, malformed or forged."""
        if not cookie or cookie.count(".") != 1:
            return None
        visitor, signature = cookie.split(".")
        if not _VISITOR.match(visitor) or not hmac.compare_digest(signature, self._sign(visitor)):
            return None
        return visitor

    def _sign(self, visitor: str) -> str:
        digest = hmac.new(self._key, f"{self._channel}:{visitor}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")
