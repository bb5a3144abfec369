"""Sub-agents: single model calls with a fixed prompt and a checked JSON result.

- :mod:`.definitions` loads the Markdown definitions (built-ins and the config dir's);
- :mod:`.runner` decides who may call what and runs the model with fallbacks and repair;
- :mod:`.memory`, :mod:`.files`, :mod:`.transcript` are the built-ins' data handling;
- :mod:`.summarize` folds long threads into a ``summary`` memory item.
"""

from gateway.subagents.base import (
    Invocation,
    SubagentError,
    SubagentRefusedError,
    SubagentResult,
    SubagentUnavailableError,
)
from gateway.subagents.definitions import SubagentDefinition, load_definitions
from gateway.subagents.runner import SubagentRunner
from gateway.subagents.summarize import Summarizer, context_start, maybe_summarize

__all__ = [
    "Invocation",
    "SubagentDefinition",
    "SubagentError",
    "SubagentRefusedError",
    "SubagentResult",
    "SubagentRunner",
    "SubagentUnavailableError",
    "Summarizer",
    "context_start",
    "load_definitions",
    "maybe_summarize",
]
