"""The Telegram connector (python-telegram-bot): long polling or webhook in, HTML out."""

from connectors.telegram.api import TelegramTuning
from connectors.telegram.connector import TelegramConnector

__all__ = ["TelegramConnector", "TelegramTuning"]
