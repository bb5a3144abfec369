"""The web tools: ``web_request`` (structured HTTP) and ``web_scrape`` (pages and search).

Both reach the network through the egress guard of :mod:`tools.egress` under
``net.http:egress`` and its allowlists; ``web_scrape``'s search mode asks the configured search
backend under ``web.search``. ``TOOLS`` is this family's rows of :mod:`tools.registry`, in
listing order; ``instructions/`` holds the packaged instruction file of ``web.search``
(``net.http``'s is the host family's, shared with ``net_http``).
"""

from __future__ import annotations

from tools.base import HostTool
from tools.web import web_request, web_scrape

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (web_request.TOOL, web_scrape.TOOL)
