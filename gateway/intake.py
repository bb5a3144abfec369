"""Where every connector hands its events: the pipeline, then the chat command a message carries.

Once the gateway stops, :class:`Intake` refuses events with :class:`ShuttingDownError`; the
connector then does not acknowledge them, so the platform delivers them again after the restart.
"""

from __future__ import annotations

from dataclasses import replace

from connectors.base import InboundEvent, IntakeResult, IntakeStatus
from gateway.commands import ChatCommands, command_of
from gateway.errors import TransientError
from gateway.pipeline import Pipeline

__all__ = ["Intake", "ShuttingDownError"]


class ShuttingDownError(TransientError):
    """Raised to connectors during shutdown: do not acknowledge the event."""


class Intake:
    """The :data:`connectors.base.IntakeHandler` of every connector.

    Args:
        pipeline (:class:`gateway.pipeline.Pipeline`): Stores each event and queues its turn.
        commands (:class:`gateway.commands.ChatCommands`): Runs the command a stored message is.
    """

    def __init__(self, pipeline: Pipeline, commands: ChatCommands):
        self.pipeline = pipeline
        self.commands = commands
        self._open = True

    def close(self) -> None:
        """Refuse every event from now on."""
        self._open = False

    async def __call__(self, event: InboundEvent) -> IntakeResult:
        if not self._open:
            raise ShuttingDownError("the gateway is stopping")
        result = await self.pipeline.ingest(event)
        if result.status is IntakeStatus.STORED and result.thread_id is not None:
            command = command_of(event.text)
            if command:
                reply = await self.commands.run(command, result, post=not event.native_command)
                return replace(result, reply=reply)
        return result
