"""The short status a chat shows while a tool runs ("Running a command…").

A tool family's instruction file may carry its label on a line of its own,
``<!-- status: Reading a file… -->`` (an HTML comment, kept out of the prompt by
:func:`tools.instruction_files.strip_status`). Without one, the defaults below apply, then "Using
<tool>…". A channel's ``tool_status`` (by tool name or capability prefix) wins over both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tools.base import HostTool
from tools.instruction_files import OVERRIDE_DIR, read_instruction_file, status_line
from tools.registry import packaged_instructions

__all__ = ["StatusLabels"]

MAX_LABEL = 80

# Labels for families whose instruction files have no status line (yet).
_DEFAULTS: dict[str, str] = {
    "shell.exec": "Running a command…",
    "fs.read": "Reading a file…",
    "fs.write": "Writing a file…",
    "git.read": "Reading the repository…",
    "net.http": "Fetching a page…",
    "web.search": "Searching the web…",
    "browser.use": "Using the browser…",
    "image.generate": "Making an image…",
    "agent.dispatch": "Asking a helper agent…",
    "memory.access": "Checking memory…",
    "channel.send": "Posting a message…",
    "schedule.manage": "Updating schedules…",
}


class StatusLabels:
    """Each tool's status label, read once from the instruction files."""

    def __init__(self, by_prefix: Mapping[str, str], tools: Sequence[HostTool]):
        self._by_prefix = {**_DEFAULTS, **by_prefix}
        self._prefix_of = {t.mcp_name: t.prefix for t in tools}

    @classmethod
    def load(cls, config_dir: Path, tools: Sequence[HostTool]) -> StatusLabels:
        labels: dict[str, str] = {}
        for prefix in dict.fromkeys(t.prefix for t in tools):
            for path in (config_dir / OVERRIDE_DIR / f"{prefix}.md", packaged_instructions(prefix)):
                text = read_instruction_file(path) if path is not None else None
                label = status_line(text) if text else None
                if label:
                    labels[prefix] = label[:MAX_LABEL]
                    break
        return cls(labels, tools)

    def label(self, tool: str, overrides: Mapping[str, str] | None = None) -> str:
        """The label for a call of ``tool`` (its MCP name); ``overrides`` by name or prefix."""
        prefix = self._prefix_of.get(tool, "")
        for key in (tool, prefix):
            if overrides and key in overrides:
                return overrides[key][:MAX_LABEL]
        return self._by_prefix.get(prefix) or f"Using {tool}…"
