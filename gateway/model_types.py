"""Reading pydantic model annotations: the helpers the reference docs and the config
error wording share. Imports nothing of the project."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel", "is_model", "union_members", "unwrap"]


def unwrap(tp: Any) -> Any:
    """``tp`` without ``Annotated[...]`` layers."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def union_members(tp: Any) -> tuple[Any, ...]:
    """The alternatives of a union (``X | None`` included), else ``(tp,)``."""
    tp = unwrap(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return tuple(unwrap(a) for a in typing.get_args(tp))
    return (tp,)


def is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


class StrictModel(BaseModel):
    """A settings model: unknown keys are errors, values never change once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True)
