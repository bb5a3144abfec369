"""A fake Telegram Bot API for tests: see :class:`FakeTelegramAPI`."""

from tests.fakes.telegram_api.entities import HtmlParseError, auto_entities, parse_html, utf16_len
from tests.fakes.telegram_api.messages import SentMessage
from tests.fakes.telegram_api.server import DEFAULT_TOKEN, FakeTelegramAPI

__all__ = [
    "DEFAULT_TOKEN",
    "FakeTelegramAPI",
    "HtmlParseError",
    "SentMessage",
    "auto_entities",
    "parse_html",
    "utf16_len",
]
