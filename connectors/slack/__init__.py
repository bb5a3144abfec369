"""Slack channel connector (Socket Mode or the HTTP Events API, via slack-bolt)."""

from connectors.slack.connector import SlackConnector

__all__ = ["SlackConnector"]
