"""The pure parts of an inbound webhook: checking the sender's secret, naming the event and the
delivery, and filling the prompt template from the JSON payload.

The template is not ``str.format``: only ``{dotted.keys}`` are looked up (list items by
index), nothing is called or evaluated, and every value is cut to a bounded size.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["delivery_id", "event_name", "fill_prompt", "signature_ok"]

MAX_VALUE_CHARS = 2000  # one filled-in value; a payload's huge diff stays out of the prompt
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z0-9_.\-]{1,200})\}")


def signature_ok(auth: str, secret: str, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether the request carries ``secret`` the way ``auth`` says; constant-time compares."""
    if auth == "github":
        given = headers.get("X-Hub-Signature-256", "")
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(given.encode(), expected.encode())
    if auth == "gitlab":
        return hmac.compare_digest(headers.get("X-Gitlab-Token", "").encode(), secret.encode())
    scheme, _, value = headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), secret.encode())


def event_name(auth: str, headers: Mapping[str, str]) -> str:
    header = {"github": "X-GitHub-Event", "gitlab": "X-Gitlab-Event"}.get(auth, "X-Talon-Event")
    return headers.get(header, "")[:100]


def delivery_id(auth: str, headers: Mapping[str, str], body: bytes) -> str:
    """The sender's id of this delivery, the same on a redelivery; the body's hash without one."""
    header = {"github": "X-GitHub-Delivery", "gitlab": "X-Gitlab-Event-UUID"}.get(auth, "Idempotency-Key")
    given = headers.get(header, "").strip()
    if given and len(given) <= 200:
        return given
    return "sha256:" + hashlib.sha256(body).hexdigest()


def fill_prompt(template: str, payload: Any) -> str:
    """``template`` with each ``{a.b.0.c}`` replaced by that value of ``payload``; a key the
    payload lacks reads ``(missing a.b.0.c)``, so the persona sees what was not there."""

    def value(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        path = match.group(1)
        found = _lookup(payload, path.split("."))
        if found is _MISSING:
            return f"(missing {path})"
        text = found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)
        return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "…"

    return _FIELD.sub(value, template)


_MISSING = object()


def _lookup(node: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node
