"""Tool instruction files: the guidance injected into a persona's system prompt per tool.

For each capability prefix (``channel.send``, ``memory.access``, ...) the text comes from
``templates/tool-instructions/<prefix>.md`` in the config dir when that file is usable,
otherwise from the packaged default: ``instructions/<prefix>.md`` in the package of the tool's
family (:func:`tools.registry.packaged_instructions`). A usable file starts with a ``##``
heading (one that does not is ignored with a warning naming it); empty and missing files are
ignored. Files are read once, when the daemon starts.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib.resources.abc import Traversable
from pathlib import Path

from gateway.labels import holds, tool_prefixes
from tools.base import HostTool
from tools.registry import packaged_instructions

__all__ = ["OVERRIDE_DIR", "ToolInstructions", "read_instruction_file", "status_line", "strip_status"]

log = logging.getLogger("talon.tools")

OVERRIDE_DIR = Path("templates") / "tool-instructions"
_HEADING = re.compile(r"\A##[ \t]+\S")
# A family's tool status label (tools/status_labels.py), an HTML comment kept out of the prompt.
_STATUS = re.compile(r"^[ \t]*<!--[ \t]*status:[ \t]*(.+?)[ \t]*-->[ \t]*\n?", re.MULTILINE)


def status_line(text: str) -> str | None:
    """The ``<!-- status: ... -->`` label an instruction file declares, if any."""
    match = _STATUS.search(text)
    return match.group(1) if match else None


def strip_status(text: str) -> str:
    """``text`` without its status line, for the system prompt."""
    return _STATUS.sub("", text)


def read_instruction_file(path: Path | Traversable) -> str | None:
    """The file's text when usable; ``None`` when missing, empty or not starting with ``##``."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("tool instructions %s ignored: cannot read it (%s)", path, exc)
        return None
    text = text.strip()
    if not text:
        return None
    if not _HEADING.match(text):
        log.warning("tool instructions %s ignored: the file must start with a '## ' heading", path)
        return None
    return text


class ToolInstructions:
    """The instruction text of every capability prefix, loaded once.

    Args:
        texts (Mapping[:obj:`str`, :obj:`str`]): Instruction text by capability prefix.
        tools (Sequence[:class:`tools.base.HostTool`]): The tools on offer, in listing order.
    """

    def __init__(self, texts: Mapping[str, str], tools: Sequence[HostTool]):
        self._texts = dict(texts)
        # Each prefix with a text once, in listing order: asked for on every turn.
        self._prefixes = tuple(
            p for p in dict.fromkeys(p for t in tools for p in tool_prefixes(t)) if p in self._texts
        )

    @classmethod
    def load(cls, config_dir: Path, tools: Sequence[HostTool]) -> ToolInstructions:
        """Read the override or packaged file of each tool's prefix.

        Args:
            config_dir (:class:`pathlib.Path`): The directory of ``talon.yaml``.
            tools (Sequence[:class:`tools.base.HostTool`]): The tools on offer.
        """
        texts: dict[str, str] = {}
        for prefix in dict.fromkeys(p for t in tools for p in tool_prefixes(t)):
            text = read_instruction_file(config_dir / OVERRIDE_DIR / f"{prefix}.md")
            packaged = packaged_instructions(prefix)
            if text is None and packaged is not None:
                text = read_instruction_file(packaged)
            if text is not None:
                texts[prefix] = strip_status(text)
        return cls(texts, tools)

    def text(self, prefix: str) -> str | None:
        return self._texts.get(prefix)

    def for_labels(self, labels: Iterable[str]) -> list[str]:
        """The texts of the tools ``labels`` allow, each prefix once, in listing order."""
        labels = tuple(labels)
        return [self._texts[prefix] for prefix in self._prefixes if holds(labels, prefix)]
