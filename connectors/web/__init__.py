"""The web chat channel (``type: web``): :class:`connectors.web.connector.WebConnector`."""

from connectors.web.connector import WebConnector

__all__ = ["WebConnector"]
