"""An in-process gateway for tests: real store, queue, outbox and console channel, with
the model behind a local stand-in API server (errbot-style test backend)."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from connectors.base import IntakeResult
from gateway.config import load_settings
from gateway.daemon import Gateway
from gateway.personas import load_personas


def write_config(
    root: Path,
    *,
    provider: dict[str, Any],
    model: str = "fake:test-model",
    extra: dict[str, Any] | None = None,
    personas: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """A config dir with a console channel bound to ``assistant`` using provider ``fake``."""
    config: dict[str, Any] = {
        "data_dir": "data",
        "timezone": "UTC",
        "providers": {"fake": provider},
        "channels": [{"name": "console", "type": "console"}],
        "bindings": [{"channel": "console", "persona": "assistant"}],
        "queue": {"backoff_base": 0.05, "backoff_max": 0.2, "max_attempts": 3},
        "outbox": {"backoff_base": 0.05, "backoff_max": 0.2},
        "shutdown_grace": 2,
    }
    for key, value in (extra or {}).items():
        config[key] = value
    (root / "talon.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    for name, spec in (personas or {"assistant": {}}).items():
        folder = root / "personas" / name
        folder.mkdir(parents=True, exist_ok=True)
        spec = {"model": model, **spec}
        system = spec.pop("system", f"# {name}\n\nYou are {name}.")
        (folder / "persona.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
        (folder / "system.md").write_text(textwrap.dedent(system), encoding="utf-8")
    return root / "talon.yaml"


def provider_for(fake: Any, kind: str = "anthropic") -> dict[str, Any]:
    return {"type": kind, "base_url": fake.base_url, "api_key": "test-key", "max_retries": 0, "timeout": 10}


@asynccontextmanager
async def running_gateway(config: Path) -> AsyncIterator[Gateway]:
    settings = load_settings(config)
    gateway = Gateway(settings, load_personas(settings))
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.close()


class Turn:
    """What a console user saw for one message: reply texts and how the turn ended."""

    def __init__(self, intake: IntakeResult, texts: list[str], status: str, error: str | None):
        self.intake = intake
        self.texts = texts
        self.status = status
        self.error = error

    @property
    def text(self) -> str:
        return "\n\n".join(self.texts)


async def say(gateway: Gateway, text: str, *, thread: str = "main", timeout: float = 30.0, **kw: Any) -> Turn:
    """Send a console message and wait until its turn ended and the reply was delivered."""
    console = gateway.components.control.console(None)
    assert console is not None
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    with console.attach(thread, inbox):
        result = await console.submit(thread, text, **kw)
        assert result.thread_id is not None
        with gateway.components.bus.subscribe(result.thread_id, inbox):
            return await _collect(inbox, result, timeout)


async def _collect(inbox: asyncio.Queue[dict[str, Any]], result: IntakeResult, timeout: float) -> Turn:
    texts: dict[int, str] = {}
    ended: dict[str, Any] | None = None
    async with asyncio.timeout(timeout):
        while ended is None or not set(ended["outbox"]) <= set(texts):
            item = await inbox.get()
            if item["type"] == "message":
                texts[item["id"]] = item["text"]
            elif item["type"] == "turn_ended" and result.message_id in item["messages"]:
                ended = item
    return Turn(result, [texts[i] for i in ended["outbox"]], ended["status"], ended.get("error"))


def tool_results(body: dict[str, Any]) -> list[tuple[bool, str]]:
    """Every tool_result block of an Anthropic request body, in order, as ``(is_error, text)``."""
    found = []
    for message in body.get("messages", []):
        for block in message["content"] if isinstance(message.get("content"), list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content", "")
                text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
                found.append((bool(block.get("is_error")), text))
    return found


def tool_texts(body: dict[str, Any]) -> list[str]:
    """The text of every tool_result block of an Anthropic request body, in order."""
    return [text for _, text in tool_results(body)]
