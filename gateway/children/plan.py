"""What a child agent runs with: :class:`ChildPlan`, and the result of a finished child."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.personas import Persona
from gateway.runtime.model import Usage

__all__ = ["ChildOutcome", "ChildPlan", "Lineage"]


@dataclass(frozen=True, slots=True)
class Lineage:
    """Where a child sits in its delegation tree.

    Attributes:
        depth (:obj:`int`): 1 for a child of a turn, 2 for its child, ...
        parent_run_id (:obj:`int` | :obj:`None`): The run that started it.
        root_run_id (:obj:`int` | :obj:`None`): The turn at the root of the tree.
    """

    depth: int
    parent_run_id: int | None
    root_run_id: int | None


@dataclass(frozen=True, slots=True)
class ChildPlan:
    """A checked child: the persona as the child holds it and what it is asked.

    Attributes:
        persona (:class:`gateway.personas.Persona`): The parent's persona with the child's
            narrowed labels, its agent type's prompt and its model.
        prompt (:obj:`str`): The task, with the working directory, roots and attachments noted.
        lineage (:class:`Lineage`): Its place in the tree.
        max_turns (:obj:`int`): Model calls it may make.
        max_tool_rounds (:obj:`int`): Tool rounds before the graceful wind-down; 0 = the
            persona's budget.
        progress_events (:obj:`bool`): It holds ``emit_progress``.
        id_prefix (:obj:`str` | :obj:`None`): A label for log correlation.
    """

    persona: Persona
    prompt: str
    lineage: Lineage
    max_turns: int
    max_tool_rounds: int = 0
    progress_events: bool = False
    id_prefix: str | None = None


@dataclass(slots=True)
class ChildOutcome:
    """What a finished foreground child (or compose node) returns."""

    run_id: int
    text: str
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    tool_calls: list[str] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "result": self.text,
            "runId": self.run_id,
            "usage": usage_dict(self.usage, self.model_calls),
            "toolCalls": list(self.tool_calls),
        }
        if self.progress:
            out["progress"] = list(self.progress)
        return out


def usage_dict(usage: Usage, model_calls: int) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "model_calls": model_calls,
    }
