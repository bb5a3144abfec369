"""Slash commands, sent as Slack sends them: a ``slash_commands`` envelope over Socket Mode,
or a signed form post to ``events_url`` over HTTP. The acknowledgement's payload (Socket
Mode) or response body (HTTP) is what Slack shows the user, kept as ``Envelope.response``."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from tests.fakes.slack_api.model import APP_ID, TEAM_ID, Envelope


class SlashCommands:
    """Mixed into :class:`tests.fakes.slack_api.server.FakeSlack`."""

    def slash_payload(
        self,
        command: str,
        text: str = "",
        *,
        channel: str = "C0GENERAL",
        user: str = "U0HUMAN01",
        user_name: str = "ada",
    ) -> dict[str, str]:
        """The fields Slack sends for ``command`` typed in ``channel``; no thread is named."""
        trigger = f"{int(time.time())}.{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:16]}"
        return {
            "token": "verification-token-unused",
            "team_id": TEAM_ID,
            "team_domain": "fake",
            "channel_id": channel,
            "channel_name": "directmessage" if channel.startswith("D") else "general",
            "user_id": user,
            "user_name": user_name,
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": f"http://127.0.0.1:{self.port}/commands/{uuid.uuid4().hex}",  # type: ignore[attr-defined]
            "trigger_id": trigger,
        }

    async def slash_command(self, command: str, text: str = "", **fields: Any) -> Envelope:
        """Send one slash command (see :meth:`slash_payload`); over HTTP the returned envelope
        already holds the response, over Socket Mode wait for its ack."""
        return await self.send_slash_payload(self.slash_payload(command, text, **fields))

    async def send_slash_payload(self, payload: Any) -> Envelope:
        """Send ``payload`` as a slash command, whatever it holds (malformed ones too)."""
        if not self.events_url:  # type: ignore[attr-defined]
            return await self.deliver(payload, kind="slash_commands")  # type: ignore[attr-defined]
        envelope = Envelope(envelope_id=str(uuid.uuid4()), payload=payload, kind="slash_commands", attempts=1)
        self.state.envelopes.append(envelope)  # type: ignore[attr-defined]
        body = urlencode(payload) if isinstance(payload, dict) else str(payload)
        timestamp = str(int(time.time()))
        signature = SignatureVerifier(self.signing_secret).generate_signature(  # type: ignore[attr-defined]
            timestamp=timestamp, body=body
        )
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": signature,
        }
        async with self._session.post(self.events_url, data=body, headers=headers) as resp:  # type: ignore[attr-defined]
            envelope.acked = resp.status == 200
            text = await resp.text()
        envelope.response = json.loads(text) if text.startswith("{") else (text or None)
        return envelope
