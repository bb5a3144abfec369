"""Where every connector hands its events: the pipeline, then the chat command a message carries.

Once the gateway stops, :class:`Intake` refuses events with :class:`ShuttingDownError`; the
connector then does not acknowledge them, so the platform delivers them again after the restart.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanKind

from connectors.base import InboundEvent, IntakeResult, IntakeStatus
from gateway import otel
from gateway.commands import ChatCommands, command_of
from gateway.errors import TransientError
from gateway.pipeline import Pipeline

if TYPE_CHECKING:
    from gateway.interactions.service import Interactions

__all__ = ["Intake", "ShuttingDownError"]


class ShuttingDownError(TransientError):
    """Raised to connectors during shutdown: do not acknowledge the event."""


class Intake:
    """The :data:`connectors.base.IntakeHandler` of every connector.

    Args:
        pipeline (:class:`gateway.pipeline.Pipeline`): Stores each event and queues its turn.
        commands (:class:`gateway.commands.ChatCommands`): Runs the command a stored message is.
        interactions (:class:`gateway.interactions.service.Interactions`, optional): Takes taps,
            and replies that answer a pending question, before the pipeline (they start no turn).
    """

    def __init__(self, pipeline: Pipeline, commands: ChatCommands, interactions: Interactions | None = None):
        self.pipeline = pipeline
        self.commands = commands
        self.interactions = interactions
        self._open = True

    def close(self) -> None:
        """Refuse every event from now on."""
        self._open = False

    async def __call__(self, event: InboundEvent) -> IntakeResult:
        if not self._open:
            raise ShuttingDownError("the gateway is stopping")
        if not otel.enabled():
            return await self._take(event)
        with otel.span("talon.intake", attributes=_event_attributes(event), kind=SpanKind.CONSUMER) as span:
            result = await self._take(event)
            otel.set_attributes(
                span,
                {
                    "talon.outcome": result.status.value,
                    "talon.thread_id": result.thread_id,
                    "talon.message_id": result.message_id,
                },
            )
            return result

    async def _take(self, event: InboundEvent) -> IntakeResult:
        if self.interactions is not None and self.interactions.wants(event):
            answered = await self.interactions.take(event)
            if answered is not None:
                return answered
        if event.tap is not None:  # a tap nobody takes is never a message
            return IntakeResult(IntakeStatus.STORED, reply="This button is no longer valid.")
        result = await self.pipeline.ingest(event)
        if result.status is IntakeStatus.STORED and result.thread_id is not None:
            command = command_of(event.text)
            if command:
                reply = await self.commands.run(command, result, post=not event.native_command)
                return replace(result, reply=reply)
        return result


def _event_attributes(event: InboundEvent) -> dict[str, Any]:
    """The intake span's attributes: ids and sizes; the text only with content on."""
    return {
        "talon.channel": event.channel,
        "talon.event_id": event.event_id,
        "talon.chat_type": event.chat_type,
        "talon.text_bytes": len(event.text.encode("utf-8", "surrogatepass")),
        "talon.attachments": len(event.attachments),
        "talon.message.text": otel.content(event.text),
    }
