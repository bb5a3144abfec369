"""``traces:`` in talon.yaml: run traces in the store, and OpenTelemetry spans over OTLP/HTTP."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator

from gateway.model_types import StrictModel

__all__ = ["TracesSettings"]


class TracesSettings(StrictModel):
    content: bool = Field(
        False,
        description="also store prompts, tool arguments, tool results and model text in run traces "
        "(off: only names, sizes, timings, tokens and error classes)",
    )
    retention_days: float = Field(30.0, gt=0, description="run traces older than this are deleted")
    otlp_endpoint: str | None = Field(
        None,
        description="an OpenTelemetry collector's OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318 "
        "(`/v1/traces` is added to a bare host); null = no spans are exported (docs/tracing.md)",
    )
    service_name: str = Field("talon", min_length=1, description="the spans' `service.name`")
    sample_ratio: float = Field(
        1.0, ge=0, le=1, description="share of traces exported (a turn follows its messages' choice)"
    )
    headers: dict[str, str] = Field(
        {}, description='sent with every export, e.g. {authorization: "Bearer ${OTLP_TOKEN}"}; masked in logs'
    )

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{value!r} is not an http(s) URL; write the collector's OTLP/HTTP address, "
                'e.g. "http://127.0.0.1:4318"'
            )
        return value
