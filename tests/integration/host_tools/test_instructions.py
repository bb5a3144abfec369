"""Tool instruction files: overrides in the config dir, packaged defaults, once per prefix."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tools import registry
from tools.base import HostTool
from tools.instruction_files import OVERRIDE_DIR, ToolInstructions


async def _noop(ctx: Any, args: dict[str, Any]) -> None:
    return None


def _tool(name: str, prefix: str) -> HostTool:
    return HostTool(name, name.replace("_", "."), prefix, name, {"type": "object"}, _noop)


def _override(config_dir: Path, prefix: str, text: str) -> Path:
    path = config_dir / OVERRIDE_DIR / f"{prefix}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_every_registry_tool_has_a_packaged_default(tmp_path: Path) -> None:
    loaded = ToolInstructions.load(tmp_path, registry.all_tools())
    for tool in registry.all_tools():
        text = loaded.text(tool.prefix)
        assert text is not None and text.startswith("## "), tool.prefix


def test_an_override_replaces_the_default(tmp_path: Path) -> None:
    _override(tmp_path, "channel.send", "## Sending\n\nOnly send to #ops after 9am.\n")
    loaded = ToolInstructions.load(tmp_path, registry.all_tools())
    assert loaded.for_labels(["channel.send:*"]) == ["## Sending\n\nOnly send to #ops after 9am."]


def test_an_override_without_a_heading_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _override(tmp_path, "memory.access", "Remember everything.\n")
    with caplog.at_level(logging.WARNING, logger="talon.tools"):
        loaded = ToolInstructions.load(tmp_path, registry.all_tools())
    assert str(path) in caplog.text and "must start with a '## ' heading" in caplog.text
    assert (loaded.text("memory.access") or "").startswith("## Memory (memory_access)")


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_an_empty_override_is_ignored_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    _override(tmp_path, "memory.access", text)
    with caplog.at_level(logging.WARNING, logger="talon.tools"):
        loaded = ToolInstructions.load(tmp_path, registry.all_tools())
    assert caplog.text == ""
    assert (loaded.text("memory.access") or "").startswith("## Memory (memory_access)")


def test_only_allowed_tools_are_injected_each_prefix_once_in_listing_order(tmp_path: Path) -> None:
    tools = [
        _tool("persona_send", "persona.send"),
        _tool("persona_list", "persona.send"),
        _tool("subagent_invoke", "subagent.invoke"),
        _tool("net_http", "net.http"),
    ]
    _override(tmp_path, "persona.send", "## Delegating\n\nAsk other personas.")
    _override(tmp_path, "subagent.invoke", "## Sub-agents\n\nRun helpers.")
    loaded = ToolInstructions.load(tmp_path, tools)
    assert loaded.for_labels(["subagent.invoke", "persona.send:*"]) == [
        "## Delegating\n\nAsk other personas.",
        "## Sub-agents\n\nRun helpers.",
    ]
    assert loaded.for_labels(["persona.send:researcher"]) == ["## Delegating\n\nAsk other personas."]
    assert loaded.for_labels([]) == []
    # net.http's packaged default is used because no override exists.
    assert loaded.for_labels(["net.http:egress"])[0].startswith("## ")
