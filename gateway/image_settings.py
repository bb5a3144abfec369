"""``images:`` in talon.yaml: the OpenAI-compatible images endpoint behind image_generate and image_edit."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.model_types import StrictModel

__all__ = ["ImageSettings", "image_problems"]


class ImageSettings(StrictModel):
    provider: str | None = Field(
        None,
        description="a providers entry of type openai whose /images/generations and /images/edits make "
        "pictures; null = image_generate and image_edit are not offered",
    )
    model: str = Field("gpt-image-1", description="the model used when a call names none")
    models: list[str] = Field(
        ["gpt-image-1", "gpt-image-1-mini", "gpt-image-1.5", "gpt-image-2"],
        min_length=1,
        description="the models a call may name (its model argument)",
    )
    per_thread: int = Field(
        10, ge=0, description="images one thread may make, generations and edits counted apart"
    )
    per_day: int = Field(
        50,
        ge=0,
        description="images all threads together may make per UTC day, generations and edits together",
    )
    timeout: float = Field(180.0, gt=0, le=600, description="seconds per images call")
    max_image_bytes: int = Field(
        25_000_000,
        ge=10_000,
        description="largest image accepted back from the endpoint, and per reference image",
    )


def image_problems(raw: dict[str, Any]) -> list[str]:
    """``images.provider`` must name an openai-type provider."""
    images = raw.get("images")
    name = images.get("provider") if isinstance(images, dict) else None
    if not name:
        return []
    providers = raw.get("providers") if isinstance(raw.get("providers"), dict) else {}
    spec = providers.get(name)
    if not isinstance(spec, dict):
        known = ", ".join(str(p) for p in providers) or "(none: add one under providers)"
        return [f"images.provider: no provider named {name!r}; use one of {known}"]
    if spec.get("type") != "openai":
        return [
            f"images.provider: {name!r} is of type {spec.get('type')!r}; images need an OpenAI-compatible "
            "provider (type: openai, base_url of a server with /images endpoints)"
        ]
    return []
