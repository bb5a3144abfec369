"""Checks of talon.yaml across keys (a binding's channel exists, a Slack channel can receive,
a web channel has its HTTP server, ...). They work on the raw mapping, so that they run and
report even when some values failed validation."""

from __future__ import annotations

from typing import Any

from gateway.channel_settings import SECRET_HINTS
from gateway.config_errors import did_you_mean
from gateway.image_settings import image_problems
from gateway.voice_settings import voice_problems

__all__ = ["cross_check"]


def _webhook_problems(raw: dict[str, Any], channels: list[str]) -> list[str]:
    http = raw.get("http") if isinstance(raw.get("http"), dict) else {}
    routes = http.get("webhooks") if isinstance(http.get("webhooks"), list) else []
    problems = []
    for i, route in enumerate(routes):
        if isinstance(route, dict) and "channel" in route and route["channel"] not in channels:
            guess = did_you_mean(str(route["channel"]), channels)
            problems.append(
                f"http.webhooks[{i}].channel: no channel named {route['channel']!r}; "
                + (f"did you mean {guess!r}? " if guess else "")
                + f"use one of {', '.join(channels) or '(none: add one under channels)'}"
            )
    return problems


def cross_check(raw: dict[str, Any]) -> list[str]:
    """Every problem across keys, each as ``key.path: what is wrong; the fix``."""
    problems: list[str] = []
    channels = (
        [c for c in raw.get("channels") or [] if isinstance(c, dict)]
        if isinstance(raw.get("channels"), list)
        else []
    )
    names = [c.get("name") for c in channels]
    for i, ch in enumerate(channels):
        ctype = ch.get("type")
        if ch.get("name") is not None and names.index(ch.get("name")) != i:
            problems.append(
                f"channels[{i}].name: {ch.get('name')!r} is used twice; channel names must be unique"
            )
        for (secret_type, key), var in SECRET_HINTS.items():
            if ctype == secret_type and key in ch and not ch[key] and key != "app_token":
                problems.append(f"channels[{i}].{key}: empty; set {var} in .env or remove this channel")
        if ctype == "slack" and not ch.get("app_token") and not ch.get("signing_secret"):
            problems.append(
                f"channels[{i}]: Slack needs app_token (Socket Mode) or signing_secret (HTTP events); "
                "set SLACK_APP_TOKEN in .env"
            )
        if ctype == "web" and not isinstance(raw.get("http"), dict):
            problems.append(
                f"channels[{i}]: a web channel is served by the HTTP server; add "
                'http: {listen: "127.0.0.1:8787"} (docs/platforms/web.md)'
            )
        for j, site in enumerate(ch.get("sites") or [] if ctype == "web" else []):
            if isinstance(site, dict) and "token" in site and not site["token"]:
                problems.append(
                    f"channels[{i}].sites[{j}].token: empty; set the variable it names in .env "
                    "(a random string of at least 16 characters, e.g. from `openssl rand -hex 24`)"
                )
    operator = raw.get("operator") if isinstance(raw.get("operator"), dict) else {}
    if operator.get("channel") is not None and operator["channel"] not in names:
        guess = did_you_mean(str(operator["channel"]), [str(n) for n in names])
        problems.append(
            f"operator.channel: no channel named {operator['channel']!r}; "
            + (f"did you mean {guess!r}? " if guess else "")
            + f"use one of {', '.join(str(n) for n in names) or '(none: add one under channels)'} or null"
        )
    bindings = raw.get("bindings") if isinstance(raw.get("bindings"), list) else []
    for i, b in enumerate(bindings):
        if isinstance(b, dict) and b.get("channel") not in names:
            guess = did_you_mean(str(b.get("channel")), [str(n) for n in names])
            problems.append(
                f"bindings[{i}].channel: no channel named {b.get('channel')!r}; "
                + (f"did you mean {guess!r}? " if guess else "")
                + f"use one of {', '.join(str(n) for n in names) or '(none: add one under channels)'}"
            )
    problems += _webhook_problems(raw, [str(n) for n in names])
    problems += voice_problems(raw)
    problems += image_problems(raw)
    if raw.get("console") is not None and raw.get("http") is None:
        problems.append(
            'console: the web console is served by the HTTP server; add http: {listen: "127.0.0.1:8787"} '
            "(or remove console:)"
        )
    return problems
