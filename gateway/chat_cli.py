"""``talon chat``: one-shot (``-m``) for scripts, the chat window (:mod:`gateway.chat_window`) for people.

``-m`` prints the reply as the model wrote it; ``--render`` prints it rendered for the terminal.
What either prints is confirmed to the daemon as seen, so a window does not show it again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.chat_protocol import ChatFailedError, chat_request, confirm_seen
from gateway.chat_window import interactive
from gateway.control_client import ControlClient

__all__ = ["ChatFailedError", "interactive", "one_shot", "render_for_terminal"]


async def one_shot(
    data_dir: Path, text: str, *, thread: str, persona: str | None, timeout: float
) -> list[str]:
    """Send ``text`` and return the reply chunks as the model wrote them. Raises
    ChatFailedError, TimeoutError, DaemonNotRunningError."""
    chunks: list[str] = []
    shown = 0
    async with asyncio.timeout(timeout), ControlClient(data_dir) as client:
        async for reply in client.stream(chat_request(text, thread=thread, persona=persona)):
            kind = reply.get("type")
            if kind == "message":
                chunks.append(reply["text"])
                shown = max(shown, int(reply["id"]))
            elif kind == "error":
                raise ChatFailedError(reply.get("error", "unknown error"))
            elif kind == "done" and reply.get("status") not in ("completed", "stored"):
                raise ChatFailedError(f"turn {reply.get('status')}: {reply.get('error') or 'no reply'}")
    if shown:
        await confirm_seen(data_dir, thread, shown)
    return chunks


def render_for_terminal(markdown: str) -> str:
    """``markdown`` as the terminal shows it (``--render``)."""
    from rich.console import Console
    from rich.markdown import Markdown

    console = Console()
    with console.capture() as captured:
        console.print(Markdown(markdown))
    return captured.get()
