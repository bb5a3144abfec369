"""What a sub-agent call is made of: its errors, its result and the invocation a built-in sees."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gateway.errors import RefusedError
from gateway.runtime.model import Usage

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.personas import Persona
    from gateway.store.db import Database
    from gateway.subagents.definitions import SubagentDefinition

__all__ = [
    "Behaviour",
    "Check",
    "Invocation",
    "ModelOutcome",
    "PathSpace",
    "SpacePath",
    "SubagentError",
    "SubagentRefusedError",
    "SubagentResult",
    "SubagentUnavailableError",
    "UsageTally",
    "limit_input",
    "text_input",
]


class SubagentError(RefusedError):
    """A sub-agent call failed; the message says why and, where it can, what to change."""


class SubagentRefusedError(SubagentError):
    """The persona may not invoke this sub-agent (not listed, or missing a capability)."""


class SubagentUnavailableError(SubagentError):
    """The sub-agent cannot run in this configuration (no provider, a missing key)."""


@dataclass(slots=True)
class UsageTally:
    """Tokens and model calls of one invocation, summed over fallbacks and repairs."""

    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    model: str | None = None

    def add(self, usage: Usage, model: str) -> None:
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.model_calls += 1
        self.model = model

    def as_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "model_calls": self.model_calls,
            "model": self.model,
        }


@dataclass(frozen=True, slots=True)
class SubagentResult:
    """What ``subagent_invoke`` returns.

    Attributes:
        summary (:obj:`str`): A short human-readable account of the result.
        data (Any): The structured result (schema-checked when the sub-agent has an
            ``output_schema``), or :obj:`None` for a free-text sub-agent.
        usage (dict): ``input_tokens``, ``output_tokens``, ``model_calls``, ``model``.
    """

    summary: str
    data: Any
    usage: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "data": self.data, "usage": self.usage}


@dataclass(frozen=True, slots=True)
class ModelOutcome:
    """A model reply: its text and, for a sub-agent with an ``output_schema``, the checked JSON."""

    text: str
    data: Any = None


Check = Callable[[Any], str | None]
"""An extra check of the reply's JSON after the schema: a message for the model, or ``None``."""


class SpacePath(Protocol):
    """A checked path of a :class:`PathSpace` (``tools.workspace.roots.Resolved``)."""

    @property
    def virtual(self) -> str: ...
    @property
    def exists(self) -> bool: ...
    @property
    def is_dir(self) -> bool: ...
    @property
    def host_path(self) -> Path: ...
    def open(self, flags: int = ..., mode: int = ...) -> int: ...
    def close(self) -> None: ...


class SpaceRoot(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def host(self) -> Path: ...


class PathSpace(Protocol):
    """The roots a sub-agent's call may read and the one resolver of paths in them.

    ``tools.workspace.roots.WorkspaceRoots`` is the one implementation: the tool that invokes
    a sub-agent hands it in, so file sub-agents see exactly the path space of the file tools
    (``/workspace`` of the calling thread, ``/shared`` when the persona's labels open it).
    """

    @property
    def roots(self) -> tuple[SpaceRoot, ...]: ...
    def describe(self) -> str: ...
    def virtual_of(self, host: Path) -> str | None: ...
    def resolve(
        self,
        path: object,
        *,
        what: str = ...,
        follow_last: bool = ...,
        create_parents: bool = ...,
        missing_parents_ok: bool = ...,
    ) -> SpacePath: ...


@dataclass(slots=True)
class Invocation:
    """One call of a sub-agent, as its built-in handling sees it.

    Data is fetched from ``db`` scoped to ``thread_id``; the model is reached only through
    :meth:`complete`, which applies the model list, the deadline and the output checks.
    """

    definition: SubagentDefinition
    persona: Persona
    thread_id: int
    db: Database
    settings: Settings
    input: dict[str, Any]
    complete_fn: Callable[[Invocation, str, Check | None], Awaitable[ModelOutcome]]
    usage: UsageTally = field(default_factory=UsageTally)
    # Loop time by which every model call must be done (set when the call starts).
    deadline: float = 0.0
    # The files the call may read; None when no thread's tool call started it (summarizing).
    roots: PathSpace | None = None

    async def complete(self, content: str, *, check: Check | None = None) -> ModelOutcome:
        """Ask the model, with ``content`` as the user message.

        Args:
            content (:obj:`str`): Everything the model should see besides the prompt.
            check (:obj:`Check`, optional): Run after the schema; its message counts as a
                validation failure (one repair attempt).

        Raises:
            :class:`SubagentError`: Every model failed, or the reply stayed invalid.
            :exc:`TimeoutError`: The sub-agent's ``timeout`` passed.
        """
        return await self.complete_fn(self, content, check)

    def result(self, summary: str, data: Any) -> SubagentResult:
        return SubagentResult(summary, data, self.usage.as_dict())


def text_input(call: Invocation, key: str, max_chars: int) -> str:
    """``input.<key>`` as non-empty text, stripped.

    Raises:
        :class:`SubagentError`: Missing, not text, or longer than ``max_chars``.
    """
    value = call.input.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SubagentError(f"{call.definition.name} needs input.{key} as non-empty text")
    if len(value) > max_chars:
        raise SubagentError(f"input.{key} is {len(value)} characters; keep it under {max_chars}")
    return value.strip()


def limit_input(call: Invocation, default: int, maximum: int) -> int:
    """``input.limit``: a whole number from 1 to ``maximum`` (``default`` when absent)."""
    limit = call.input.get("limit", default)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= maximum:
        raise SubagentError(f"input.limit must be a whole number from 1 to {maximum}")
    return limit


Behaviour = Callable[[Invocation], Awaitable[SubagentResult]]
"""How a built-in turns an invocation into a result (fetching data, calling the model)."""
