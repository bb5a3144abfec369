"""The usage keys of talon.yaml: the price table, the spending budgets and the operator's chat.

:mod:`gateway.config` puts them on :class:`~gateway.config.Settings`: ``prices`` and
``currency`` price every run when it ends (:mod:`gateway.usage`), ``budgets`` refuse turns
once a user, persona or channel has spent its share (:mod:`gateway.spending`), and
``operator`` is where the 80% notices go.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from gateway.model_types import StrictModel as _Strict

__all__ = ["OperatorSettings", "Price", "SpendBudgets", "SpendLimit"]


class Price(_Strict):
    """What one model costs, per million tokens, in ``currency``."""

    input: float = Field(0.0, ge=0, description="per million input tokens (prompt, not cached)")
    output: float = Field(0.0, ge=0, description="per million output tokens")
    cache_read: float | None = Field(
        None, ge=0, description="per million input tokens read from the prompt cache; null = input"
    )
    cache_write: float | None = Field(
        None, ge=0, description="per million input tokens written to the prompt cache; null = input"
    )


class SpendLimit(_Strict):
    """One budget: tokens (in and out) or cost (in ``currency``); give one of the two."""

    tokens: int | None = Field(None, ge=1, description="tokens in and out of every model call")
    cost: float | None = Field(None, gt=0, description="cost at the price table's prices")

    @model_validator(mode="after")
    def _one_measure(self) -> SpendLimit:
        if (self.tokens is None) == (self.cost is None):
            raise ValueError(
                "give either tokens (e.g. {tokens: 200000}) or cost (e.g. {cost: 5.00}), not both"
            )
        return self


class SpendBudgets(_Strict):
    """Spending budgets; a turn that would start over one is refused with a message, and the
    operator is told once when a budget passes 80%. Days and months are in ``timezone``."""

    per_user_day: SpendLimit | None = Field(None, description="what one sender's turns may use per day")
    per_persona_month: SpendLimit | None = Field(None, description="what one persona may use per month")
    per_channel_day: SpendLimit | None = Field(None, description="what one channel may use per day")
    notice_share: float = Field(
        0.8, gt=0, le=1, description="the operator is told once per period when a budget passes this share"
    )

    @property
    def any(self) -> bool:
        return any(b is not None for b in (self.per_user_day, self.per_persona_month, self.per_channel_day))


class OperatorSettings(_Strict):
    """Where the gateway tells its operator things (budget notices)."""

    channel: str | None = Field(None, description="a channel name; null = notices go to the log only")
    chat: str | None = Field(None, description="a chat id of that channel; null = its home_chat")

    @field_validator("chat", mode="before")
    @classmethod
    def _chat_as_string(cls, value: Any) -> Any:
        return None if value is None else str(value)
