"""``http:`` in talon.yaml: the one HTTP server, off when the key is absent."""

from __future__ import annotations

import ipaddress
from typing import Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from gateway.model_types import StrictModel

__all__ = ["DEFAULT_LISTEN", "HttpSettings", "WebhookRoute", "is_loopback_host", "split_listen"]

DEFAULT_LISTEN = "127.0.0.1:8787"


def split_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port).

    Raises:
        ValueError: not of that shape, or the port is out of range.
    """
    host, sep, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(
            f'listen must be "HOST:PORT" with a port 0-65535, e.g. "{DEFAULT_LISTEN}" '
            f'(or "[::1]:8787" for IPv6); got {value!r}'
        )
    return host, int(port)


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebhookRoute(StrictModel):
    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$", description="the route's name in logs and metrics; unique"
    )
    path: str = Field(
        pattern=r"^/hooks/[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$",
        description="where senders POST, under /hooks/ (e.g. /hooks/github)",
    )
    auth: Literal["github", "gitlab", "bearer"] = Field(
        description="github: X-Hub-Signature-256 HMAC of the body; gitlab: X-Gitlab-Token; "
        "bearer: Authorization: Bearer <secret>"
    )
    secret: str = Field(
        min_length=16,
        description='the shared secret (at least 16 characters); write it as "${HOOK_SECRET}"',
    )
    events: list[str] = Field(
        [],
        description="event names taken (X-GitHub-Event, X-Gitlab-Event, or X-Talon-Event for bearer); "
        "empty = every event. Others are answered 202 and ignored",
    )
    prompt: str = Field(
        min_length=1,
        description="the message the persona gets: {dotted.keys} (and {list.0.key}) are filled from the "
        "JSON payload, {{ and }} are literal braces; a missing key reads (missing key)",
    )
    persona: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="the persona that answers")
    channel: str = Field(description="the channel the answer is posted in (a name from channels)")
    chat: str = Field(description="the chat id in that channel; its thread holds the webhook turns")
    per_minute: int = Field(30, ge=1, le=6000, description="deliveries accepted per minute; more get 429")

    @field_validator("chat", mode="before")
    @classmethod
    def _chat_as_string(cls, value: Any) -> Any:
        return None if value is None else str(value)


class HttpSettings(StrictModel):
    listen: str = Field(
        DEFAULT_LISTEN,
        description='HOST:PORT to listen on; loopback by default. Another address (e.g. "0.0.0.0:8787") '
        "is used only when written here: put a TLS reverse proxy in front of it (docs/http.md)",
    )
    public_url: str | None = Field(
        None,
        description="the URL users and senders reach this server at (the reverse proxy's https:// URL); "
        "null = http://<listen>",
    )
    max_body_bytes: int = Field(
        1_048_576, ge=1024, le=64 * 1_048_576, description="request bodies above this are refused with 413"
    )

    metrics: bool = Field(True, description="serve Prometheus metrics at /metrics")
    metrics_token: str | None = Field(
        None,
        description='a bearer token /metrics requires (write it as "${TALON_METRICS_TOKEN}"); null = none',
    )

    webhooks: list[WebhookRoute] = Field(
        [],
        description="inbound webhooks: each route turns a signed POST into a persona's turn (docs/http.md)",
    )

    @model_validator(mode="after")
    def _unique_routes(self) -> Self:
        for key in ("name", "path"):
            values = [getattr(r, key) for r in self.webhooks]
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise ValueError(
                    f"webhooks: {key} {twice[0]!r} is used twice; each route needs its own {key}"
                )
        return self

    @field_validator("listen")
    @classmethod
    def _listen_shape(cls, value: str) -> str:
        split_listen(value)
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url_shape(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                f"public_url must be an http:// or https:// URL, e.g. https://talon.example.com; got {value!r}"
            )
        return value.rstrip("/") if value else value

    @field_validator("metrics_token", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value

    @property
    def host(self) -> str:
        return split_listen(self.listen)[0]

    @property
    def port(self) -> int:
        return split_listen(self.listen)[1]

    @property
    def loopback(self) -> bool:
        return is_loopback_host(self.host)
