"""``web_search:`` in talon.yaml: the search backend behind ``web_scrape``'s ``search`` mode."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from gateway.model_types import StrictModel

__all__ = ["SEARCH_DEFAULT_URLS", "WebSearchSettings"]

# The public endpoint of each hosted provider; SearXNG is self-hosted, so it has none.
SEARCH_DEFAULT_URLS: dict[str, str] = {"brave": "https://api.search.brave.com", "exa": "https://api.exa.ai"}


class WebSearchSettings(StrictModel):
    provider: Literal["searxng", "brave", "exa"] | None = Field(
        None, description="searxng (a self-hosted instance, JSON API), brave or exa; null = search is off"
    )
    url: str | None = Field(
        None,
        description="the backend's root URL; SearXNG needs one, null = the provider's own for brave and exa. "
        "Trusted as written: it may be a private address, and no persona allowlist applies to it",
    )
    api_key: str | None = Field(
        None, description='brave and exa need one; write it as "${VAR}" so it stays out of the file'
    )
    max_results: int = Field(8, ge=1, le=20, description="results one search returns")

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.provider == "searxng" and not self.url:
            raise ValueError(
                "provider searxng needs url: the root of your SearXNG instance (JSON format enabled)"
            )
        if self.provider in ("brave", "exa") and not self.api_key:
            raise ValueError(
                f'provider {self.provider} needs api_key, e.g. api_key: "${{{self.provider.upper()}_API_KEY}}"'
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http:// or https:// URL; got {self.url!r}")
        return self
