"""The interactive ``talon chat`` window.

The prompt is prompt_toolkit's, reading keys in raw mode while replies arrive: what arrives
is printed above the prompt (``patch_stdout``) and the line being typed is redrawn below it,
so ``/stop`` or ``/new`` typed while a reply is pending is sent at once, and Ctrl-C or Ctrl-D
leave at once. Replies scroll into the terminal's scrollback; ``/page`` shows the last one
in a pager.

The window follows its thread on an ``attach`` connection (replies, notices, ``talon send``
notifications). When the daemon goes away the window says so, reconnects with backoff and
says so again; on every attach the daemon first hands over what no window has shown, so a
reply that arrived while no window was open (or the daemon was restarting) is shown. The
window confirms to the daemon what it printed (the ``seen`` op).

While the model writes, the reply so far is drawn above the prompt and redrawn in place as
it grows (the daemon's ``preview`` deliveries); the final reply then prints above it, as any
reply does. With standard input not a terminal only final replies are printed.

Ctrl-C leaves the window and does not cancel the turn: the daemon keeps writing the reply and
the next window on the thread shows it; ``/stop`` is the one way to cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from gateway.backoff import Backoff
from gateway.chat_protocol import ChatFailedError, chat_request, confirm_seen
from gateway.control_client import ControlClient, DaemonNotRunningError

__all__ = ["HELP", "ChatWindow", "Screen", "interactive"]

RECONNECT = Backoff(base=0.2, max=2.0)

HELP = """\
Commands (typed at the prompt, also while a reply is being written):
  /stop    cancel the reply being written
  /new     start a new conversation in this thread (the model forgets what came before)
  /usage   tokens and cost of this conversation and yours, today and this month
  /page    show the last reply in a pager
  /help    this list
  /quit    leave (so do Ctrl-C and Ctrl-D); a reply still being written is kept
           and shown when this thread is opened again"""

LOCAL_COMMANDS = frozenset({"/help", "/page", "/quit", "/exit"})

Attached = tuple[ControlClient, AsyncIterator[dict[str, Any]], dict[str, Any]]


class Screen:
    """Where the window writes: rendered by rich, to whatever ``sys.stdout`` is at the time
    (prompt_toolkit's proxy while the prompt runs, which prints above the prompt)."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.last_reply = ""

    def _write(self, *renderables: Any) -> None:
        with self.console.capture() as captured:
            self.console.print(*renderables)
        sys.stdout.write(captured.get())
        sys.stdout.flush()

    def reply(self, markdown: str) -> None:
        from rich.markdown import Markdown

        self.last_reply = markdown
        self._write(Markdown(markdown))

    def note(self, text: str) -> None:
        from rich.text import Text

        self._write(Text(text, style="dim"))

    def error(self, text: str) -> None:
        from rich.text import Text

        self._write(Text(text, style="red"))

    def page(self) -> None:
        """The last reply in the terminal's pager (``$PAGER``, else ``less``)."""
        from rich.markdown import Markdown

        with self.console.pager(styles=True):
            self.console.print(Markdown(self.last_reply or "*(no reply yet)*"))


class ChatWindow:
    """One window on a console thread.

    Args:
        data_dir (:class:`pathlib.Path`): The daemon's data dir (its control socket).
        thread (:obj:`str`): The console thread's name.
        persona (:obj:`str` | :obj:`None`): The persona asked for; None for the binding's.
        screen (:class:`Screen`): Where output goes.
    """

    def __init__(self, data_dir: Path, *, thread: str, persona: str | None, screen: Screen):
        self.data_dir = data_dir
        self.thread = thread
        self.persona = persona
        self.screen = screen
        self.turns: set[asyncio.Task[None]] = set()
        self._shown: set[int] = set()
        self._replaced: set[str] = set()
        self._shown_upto = 0
        self._confirmed = 0
        self._confirm = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.working = False
        self.live_previews = False  # drawn only at a prompt (run_prompt): a pipe prints finals only
        self.preview: tuple[str, str] | None = None  # (preview id, text) of the reply being written
        self._redraw = lambda: None

    # ------------------------------------------------------------ following the thread

    async def open(self) -> None:
        """Attach to the thread. Raises DaemonNotRunningError, or ChatFailedError when the
        daemon refuses (an unknown persona, no console channel)."""
        client, stream, attached = await self._attach()
        self.screen.note(
            f"Talon chat — thread {self.thread}. /help lists the commands; Ctrl-C or Ctrl-D leaves."
        )
        self._backlog_note(attached)
        self._tasks = [
            asyncio.create_task(self._follow(client, stream), name="chat-follow"),
            asyncio.create_task(self._confirmer(), name="chat-confirm"),
        ]

    async def _attach(self) -> Attached:
        client = ControlClient(self.data_dir)
        await client.__aenter__()
        try:
            stream = client.stream({"op": "attach", "thread": self.thread, "persona": self.persona})
            first = await anext(stream)
        except BaseException:
            await client.__aexit__(None, None, None)
            raise
        if first.get("type") != "attached":
            await client.__aexit__(None, None, None)
            raise ChatFailedError(str(first.get("error") or f"unexpected reply {first!r}"))
        return client, stream, first

    def _backlog_note(self, attached: dict[str, Any]) -> None:
        unseen, left_out = int(attached.get("unseen", 0)), int(attached.get("left_out", 0))
        if left_out:
            self.screen.note(
                f"({left_out} older messages that arrived while no window was open are not shown)"
            )
        if unseen:
            self.screen.note("While no window was open:")

    async def _follow(self, client: ControlClient, stream: AsyncIterator[dict[str, Any]]) -> None:
        """Show the thread's deliveries; when the daemon goes away, reconnect until it is back."""
        while True:
            try:
                async for reply in stream:
                    if reply.get("type") == "message":
                        self.show(int(reply["id"]), str(reply["text"]), reply.get("replaces"))
                    elif reply.get("type") == "preview":
                        self.set_preview(str(reply["id"]), reply.get("text"))
                    elif reply.get("type") == "working":
                        self.set_working(bool(reply.get("on")))
                    elif reply.get("type") == "error":
                        self.screen.error(f"live updates stopped: {reply.get('error')}")
                        return
            except (ConnectionError, OSError):
                pass
            finally:
                await client.__aexit__(None, None, None)
            self.screen.note("Lost the daemon; reconnecting…")
            attempt = 0
            while True:
                attempt += 1
                await asyncio.sleep(RECONNECT.delay(attempt))
                try:
                    client, stream, attached = await self._attach()
                    break
                except (DaemonNotRunningError, ConnectionError, OSError):
                    continue
                except ChatFailedError as exc:
                    self.screen.error(f"live updates stopped: {exc}")
                    return
            self.screen.note("Reconnected to the daemon.")
            self._backlog_note(attached)
            self._confirm.set()  # a confirmation the restart swallowed is sent again

    def set_working(self, on: bool) -> None:
        """The daemon started (or ended) a turn on this thread: the prompt says so."""
        self.working = on
        self._redraw()

    def set_preview(self, preview_id: str, text: str | None) -> None:
        """The reply being written, so far (``None``: that preview is gone)."""
        if not self.live_previews:
            return
        if text is None:
            if self.preview is not None and self.preview[0] == preview_id:
                self.preview = None
        elif preview_id not in self._replaced:
            self.preview = (preview_id, text)
        self._redraw()

    def preview_lines(self, height: int) -> list[str]:
        """The last ``height`` lines of the reply being written (what the prompt shows above itself)."""
        if self.preview is None:
            return []
        return self.preview[1].splitlines()[-height:]

    def show(self, delivery_id: int, markdown: str, replaces: str | None = None) -> None:
        """Print a delivery once (it may come on both the turn's and the thread's connection)."""
        if replaces is not None:
            self._replaced.add(replaces)  # an edit of it still on the other connection is stale
            if self.preview is not None and self.preview[0] == replaces:
                self.preview = None
                self._redraw()
        if delivery_id in self._shown:
            return
        self._shown.add(delivery_id)
        self.screen.reply(markdown)
        self._shown_upto = max(self._shown_upto, delivery_id)
        self._confirm.set()

    async def _confirmer(self) -> None:
        while True:
            await self._confirm.wait()
            self._confirm.clear()
            await self._confirm_shown()

    async def _confirm_shown(self) -> None:
        upto = self._shown_upto
        if upto > self._confirmed and await confirm_seen(self.data_dir, self.thread, upto):
            self._confirmed = max(self._confirmed, upto)

    # ------------------------------------------------------------ typed lines

    def submit(self, line: str) -> asyncio.Task[None]:
        """Send a typed line now, whatever else is pending; returns the task following its turn."""
        task = asyncio.create_task(self.send(line), name="chat-turn")
        self.turns.add(task)
        self._redraw()

        def finished(done: asyncio.Task[None]) -> None:
            self.turns.discard(done)
            self._redraw()

        task.add_done_callback(finished)
        return task

    async def send(self, line: str) -> None:
        accepted = False
        try:
            async with ControlClient(self.data_dir) as client:
                async for reply in client.stream(
                    chat_request(line, thread=self.thread, persona=self.persona)
                ):
                    kind = reply.get("type")
                    if kind == "accepted":
                        accepted = True
                    elif kind == "message":
                        self.show(int(reply["id"]), str(reply["text"]), reply.get("replaces"))
                    elif kind == "preview":
                        self.set_preview(str(reply["id"]), reply.get("text"))
                    elif kind == "working":
                        self.set_working(bool(reply.get("on")))
                    elif kind == "error":
                        self.screen.error(str(reply.get("error")))
        except DaemonNotRunningError:
            self.screen.error("Not sent: the daemon is not running. Send it again once it is back.")
        except (ConnectionError, OSError):
            if not accepted:
                self.screen.error("Not sent: lost the daemon. Send it again once it is back.")
            # An accepted message is kept by the daemon: its reply comes on the thread's connection.

    def local_command(self, line: str) -> bool:
        """Run a command the window answers itself; False when ``line`` is not one.
        ``/quit`` and ``/exit`` raise EOFError, as Ctrl-D does."""
        word = line.strip().split(maxsplit=1)[0].lower() if line.strip() else ""
        if word not in LOCAL_COMMANDS:
            return False
        if word in ("/quit", "/exit"):
            raise EOFError
        if word == "/help":
            self.screen.note(HELP)
        elif word == "/page":
            from prompt_toolkit.application import run_in_terminal

            run_in_terminal(self.screen.page)
        return True

    # ------------------------------------------------------------ the two ways to read lines

    async def run_prompt(self) -> None:
        """Read lines at a prompt until Ctrl-C, Ctrl-D or ``/quit``."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.patch_stdout import patch_stdout

        session: PromptSession[str] = PromptSession()
        self._redraw = session.app.invalidate
        self.live_previews = True

        def message() -> list[tuple[str, str]]:
            rows = session.app.output.get_size().rows
            lines = self.preview_lines(max(3, rows // 2))
            live = [("", "\n".join(lines) + "\n")] if lines else []
            if self.working:
                state = [("fg:ansiyellow", "(writing… /stop cancels) ")]
            else:
                state = [("fg:ansiyellow", "(sent) ")] if self.turns else []
            return [*live, *state, ("bold fg:ansicyan", "you> ")]

        with patch_stdout(raw=True):
            while True:
                try:
                    line = await session.prompt_async(message)
                    if line.strip() and not self.local_command(line):
                        self.submit(line)
                except (KeyboardInterrupt, EOFError):
                    return

    async def run_pipe(self) -> None:
        """Standard input is not a terminal: send each line and wait for its reply."""
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            try:
                if line.strip() and not self.local_command(line):
                    await self.submit(line.rstrip("\n"))
            except EOFError:
                return

    async def close(self) -> None:
        """Stop following; confirm what was shown; say what happens to a reply still on its way."""
        pending = bool(self.turns)
        for task in [*self._tasks, *self.turns]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self.turns, return_exceptions=True)
        await self._confirm_shown()
        if pending:
            self.screen.note(
                f"Left while a reply was being written: it is kept, and shown when thread {self.thread} "
                "is opened again (talon chat --thread NAME). /stop cancels a reply."
            )


async def interactive(data_dir: Path, *, thread: str, persona: str | None) -> None:
    """The chat window on ``thread``. Raises DaemonNotRunningError or ChatFailedError before
    any prompt when the daemon is not there or refuses."""
    window = ChatWindow(data_dir, thread=thread, persona=persona, screen=Screen())
    await window.open()
    try:
        if sys.stdin.isatty():
            await window.run_prompt()
        else:
            await window.run_pipe()
    finally:
        with contextlib.suppress(Exception):
            await window.close()
