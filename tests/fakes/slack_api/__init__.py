"""A stand-in for Slack: the Web API, Socket Mode and signed HTTP event delivery.

Runs on 127.0.0.1 (port 0) inside a test::

    async with FakeSlack() as slack:
        settings = SlackChannel(..., api_base_url=slack.base_url, bot_token=slack.bot_token, ...)
        ...
        ts = await slack.inject_message("D0001", "hello", user="U0HUMAN01")
        posted = await slack.wait_for_posted("D0001", 1)

It speaks Slack's wire protocol closely enough for slack_sdk / slack-bolt to work unmodified:
``/api/<method>`` with a Bearer token (form, JSON or query parameters), Socket Mode envelopes
over a websocket (``hello``, ``events_api`` envelopes acknowledged by ``{"envelope_id"}``),
and Events API requests signed with the signing secret when ``events_url`` is set. Messages
the bot posts are echoed back as ``message`` events carrying its ``bot_id``, as Slack does.
"""

from tests.fakes.slack_api.model import (
    APP_ID,
    APP_TOKEN,
    BOT_ID,
    BOT_NAME,
    BOT_TOKEN,
    BOT_USER_ID,
    MAX_TEXT,
    SIGNING_SECRET,
    TEAM_ID,
    Envelope,
    PostedMessage,
)
from tests.fakes.slack_api.server import FakeSlack

__all__ = [
    "APP_ID",
    "APP_TOKEN",
    "BOT_ID",
    "BOT_NAME",
    "BOT_TOKEN",
    "BOT_USER_ID",
    "MAX_TEXT",
    "SIGNING_SECRET",
    "TEAM_ID",
    "Envelope",
    "FakeSlack",
    "PostedMessage",
]
