"""The ``talon`` command: one module per command group; :mod:`.app` builds the parser and runs
a command."""

from __future__ import annotations

from gateway.cli.app import main

__all__ = ["main"]
