"""Talon's exceptions: one tree under :class:`TalonError`, whose branches say what to do.

- :class:`ConfigError`: the configuration (talon.yaml, a persona, how a server is set up)
  must change; ``problems`` lists what to change.
- :class:`RefusedError`: a request or an input was refused; ``str(error)`` says why and what
  to send instead, in words fit for whoever sent it: a chat user, the model (as a tool
  result), an operator at the terminal, a peer process.
- :class:`TransientError`: something Talon relies on cannot serve now (the daemon, a socket,
  an MCP server, saving a reply); the same request may succeed later, so it is retried.
- :class:`PlatformError`: a service outside Talon (a chat platform, a model provider)
  refused or failed; ``transient`` says whether trying again later may help.

Any other exception that leaves Talon code is a bug: the turn queue gives such a turn one
more try, then dead-letters it as an internal error. Exceptions that only carry control flow
inside one module (the Slack intake's ``SkipEvent``, the renderer's ``NeedRanges``) are not
part of the tree: nothing outside that module sees them.

This module imports nothing of the project, so connectors and tools can use it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ConfigError", "PlatformError", "RefusedError", "TalonError", "TransientError"]


class TalonError(Exception):
    """The base of every exception Talon raises for others to catch."""


class ConfigError(TalonError):
    """The configuration must change before this can work.

    Args:
        problems: One problem, or several (each naming its key); ``str(error)`` is them
            joined by newlines.

    Attributes:
        problems (list[:obj:`str`]): The problems, one per entry.
    """

    def __init__(self, problems: str | Sequence[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class RefusedError(TalonError):
    """A request or an input was refused; the message says why and what to send instead."""


class TransientError(TalonError):
    """Something Talon relies on cannot serve now; the same request may succeed later."""


class PlatformError(TalonError):
    """A service outside Talon (a chat platform, a model provider) refused or failed.

    Attributes:
        transient (:obj:`bool`): Whether trying again later may help (a rate limit, an
            outage) or not (a rejected token, a malformed request).
    """

    transient: bool = False
