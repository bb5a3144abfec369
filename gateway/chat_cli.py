"""``talon chat``: one-shot (``-m``) for scripts, interactive with Markdown for people."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

from gateway.control_client import ControlClient
from gateway.errors import RefusedError


class ChatFailedError(RefusedError):
    """The daemon answered without a reply (it refused the message, or the turn failed);
    the message is the one-line reason."""


async def one_shot(
    data_dir: Path, text: str, *, thread: str, persona: str | None, timeout: float
) -> list[str]:
    """Send ``text`` and return the reply chunks. Raises ChatFailedError, TimeoutError,
    DaemonNotRunningError."""
    request = {"op": "chat", "thread": thread, "persona": persona, "text": text, "event_id": uuid.uuid4().hex}
    chunks: list[str] = []
    async with asyncio.timeout(timeout), ControlClient(data_dir) as client:
        async for reply in client.stream(request):
            kind = reply.get("type")
            if kind == "message":
                chunks.append(reply["text"])
            elif kind == "error":
                raise ChatFailedError(reply.get("error", "unknown error"))
            elif kind == "done" and reply.get("status") not in ("completed", "stored"):
                raise ChatFailedError(f"turn {reply.get('status')}: {reply.get('error') or 'no reply'}")
    return chunks


async def interactive(data_dir: Path, *, thread: str, persona: str | None) -> None:
    from rich.console import Console
    from rich.markdown import Markdown

    console = Console()
    console.print(
        f"[dim]Talon chat — thread [bold]{thread}[/bold]. /new starts over, /stop cancels, Ctrl-D quits.[/dim]"
    )
    seen: set[int] = set()
    watcher = asyncio.create_task(_watch(data_dir, thread, console, seen))
    loop = asyncio.get_running_loop()
    try:
        while True:
            try:
                line = await loop.run_in_executor(None, lambda: console.input("[bold cyan]you>[/] "))
            except EOFError:
                return
            if not line.strip():
                continue
            request: dict[str, Any] = {
                "op": "chat",
                "thread": thread,
                "persona": persona,
                "text": line,
                "event_id": uuid.uuid4().hex,
            }
            with console.status("thinking…", spinner="dots"):
                async with ControlClient(data_dir) as client:
                    async for reply in client.stream(request):
                        if reply.get("type") == "message" and reply["id"] not in seen:
                            seen.add(reply["id"])
                            console.print(Markdown(reply["text"]))
                        elif reply.get("type") == "error":
                            console.print(f"[red]{reply.get('error')}[/red]")
                        elif reply.get("type") == "done" and reply.get("status") == "failed":
                            console.print(f"[red]turn failed: {reply.get('error')}[/red]")
    finally:
        watcher.cancel()


async def _watch(data_dir: Path, thread: str, console: Any, seen: set[int]) -> None:
    """Show messages that arrive between prompts (notifications, schedules)."""
    from rich.markdown import Markdown

    try:
        async with ControlClient(data_dir) as client:
            async for reply in client.stream({"op": "attach", "thread": thread}):
                if reply.get("type") == "message" and reply["id"] not in seen:
                    seen.add(reply["id"])
                    console.print(Markdown(reply["text"]))
    except (ConnectionError, asyncio.CancelledError):
        return
    except Exception as exc:  # the watcher is a convenience; never take the prompt down
        print(f"(live updates stopped: {exc})", file=sys.stderr)
