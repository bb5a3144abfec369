"""OpenTelemetry spans over OTLP/HTTP: off unless ``traces.otlp_endpoint`` is set.

:func:`install` (``talon run``) builds a tracer provider whose ``BatchSpanProcessor`` exports
from its own thread, so a slow or absent collector never blocks the event loop; a failed
export is logged at most once a minute and costs nothing else (the batch is dropped).
:func:`shutdown` flushes what is left when the daemon stops.

Everything else calls :func:`span` (a no-op while off) and the helpers around it; none of
them raises into the caller. Which span parents which is kept in W3C ``traceparent`` strings,
which the store keeps beside the work (:mod:`gateway.store.span_contexts`), so a turn joins
its messages' trace and a background child its parent's even after a restart.

Attributes carry ids, sizes, durations, token counts and outcomes; message text, tool
arguments and results only with ``traces.content: true`` (:func:`content_on`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.store import span_contexts

if TYPE_CHECKING:
    import sqlite3

    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from gateway.traces_settings import TracesSettings

__all__ = [
    "CONTENT_CHARS",
    "content_on",
    "current_span",
    "current_trace_id",
    "enabled",
    "install",
    "keep",
    "parents",
    "recent",
    "set_attributes",
    "shutdown",
    "span",
    "traceparent",
    "uninstall",
]

log = logging.getLogger("talon.otel")

CONTENT_CHARS = 4096  # per content attribute, when content is on: collectors cap values too
FAILURE_LOG_INTERVAL = 60.0  # seconds between two log lines about failed exports
EXPORT_TIMEOUT = 5.0  # seconds one export request may take (in the exporter's thread)
SHUTDOWN_TIMEOUT = 5.0  # seconds the last flush may take when the daemon stops

_PROPAGATOR = TraceContextTextMapPropagator()
_tracer: trace.Tracer | None = None
_provider: TracerProvider | None = None
_exporter: _QuietExporter | None = None
_content = False
_keep_seconds = 30 * 86_400.0
RECENT = 4096  # parents kept in memory too, so a send need not read its run's from the store
_recent: OrderedDict[tuple[str, int], str] = OrderedDict()
_recent_lock = threading.Lock()


def install(settings: TracesSettings) -> bool:
    """Start exporting spans as ``settings`` says; returns False (and does nothing) when
    ``otlp_endpoint`` is not set."""
    global _tracer, _provider, _exporter, _content, _keep_seconds
    if settings.otlp_endpoint is None:
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    # The SDK logs every failed export (with the collector's URL); ours says it once a minute.
    logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)
    exporter = OTLPSpanExporter(
        endpoint=traces_url(settings.otlp_endpoint), headers=dict(settings.headers), timeout=EXPORT_TIMEOUT
    )
    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.service_name}),
        sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
    )
    _exporter = _QuietExporter(exporter)
    provider.add_span_processor(BatchSpanProcessor(_exporter, export_timeout_millis=10_000))
    _provider, _content, _keep_seconds = provider, settings.content, settings.retention_days * 86_400
    _tracer = provider.get_tracer("talon")
    log.info("exporting OpenTelemetry spans to %s", traces_url(settings.otlp_endpoint))
    return True


def uninstall() -> None:
    """Stop making spans (what is buffered is dropped): for tests."""
    global _tracer, _provider, _exporter, _content
    _tracer, _provider, _exporter, _content = None, None, None, False
    with _recent_lock:
        _recent.clear()


async def shutdown(timeout: float = SHUTDOWN_TIMEOUT) -> None:
    """Export what is buffered and stop, within ``timeout`` seconds, off the event loop."""
    global _tracer, _provider, _exporter
    provider, exporter, _tracer, _provider, _exporter = _provider, _exporter, None, None, None
    if provider is None:
        return
    import asyncio

    def stop() -> None:
        provider.force_flush(int(timeout * 1000))
        provider.shutdown()

    try:
        await asyncio.wait_for(asyncio.to_thread(stop), timeout + 1)
    except Exception:  # a collector that is down: its exporter retries past the timeout
        if exporter is None or exporter.due():
            log.warning("the last spans could not be exported before stopping; they are dropped")


def traces_url(endpoint: str) -> str:
    """The collector's traces URL: ``/v1/traces`` is added to an endpoint without a path."""
    from urllib.parse import urlsplit

    return endpoint.rstrip("/") + "/v1/traces" if urlsplit(endpoint).path in ("", "/") else endpoint


def enabled() -> bool:
    return _tracer is not None


def content_on() -> bool:
    """Spans may carry message text, tool arguments and results (``traces.content``)."""
    return _tracer is not None and _content


@contextlib.contextmanager
def span(
    name: str,
    *,
    parent: str | None = None,
    links: Sequence[str] = (),
    attributes: Mapping[str, Any] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
) -> Iterator[Span]:
    """A span around the ``with`` block, current inside it (so nested spans and log lines
    belong to it).

    ``parent``: a ``traceparent`` to continue instead of the current span; ``links``: more
    of them to link. An exception leaving the block marks the span failed with its class
    only (an exception's message may quote content).
    """
    if _tracer is None:
        yield INVALID_SPAN
        return
    try:
        context = _PROPAGATOR.extract({"traceparent": parent}) if parent else None
        linked = [Link(c) for c in (_span_context(tp) for tp in links) if c is not None]
        opened = _tracer.start_as_current_span(
            name,
            context=context,
            kind=kind,
            links=linked,
            attributes=_clean(attributes) if attributes else None,
            record_exception=False,
            set_status_on_exception=False,
        )
        current = opened.__enter__()
    except Exception:  # telemetry never fails the work it watches
        log.debug("could not start span %s", name, exc_info=True)
        yield INVALID_SPAN
        return
    try:
        yield current
    except BaseException as exc:
        with contextlib.suppress(Exception):
            current.set_attribute("error.type", type(exc).__name__)
            current.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        with contextlib.suppress(Exception):
            opened.__exit__(None, None, None)
        raise
    with contextlib.suppress(Exception):
        opened.__exit__(None, None, None)


def set_attributes(target: Span, attributes: Mapping[str, Any]) -> None:
    """Set ``attributes`` (None values skipped) on ``target``, never raising."""
    if not target.is_recording():
        return
    with contextlib.suppress(Exception):
        target.set_attributes(_clean(attributes))


def failed(target: Span, error_class: str) -> None:
    """Mark ``target`` failed with ``error_class``."""
    if target.is_recording():
        with contextlib.suppress(Exception):
            target.set_attribute("error.type", error_class)
            target.set_status(Status(StatusCode.ERROR, error_class))


def content(text: str | None) -> str | None:
    """``text`` for a content attribute: None unless content is on, cut at :data:`CONTENT_CHARS`."""
    if not content_on() or text is None:
        return None
    return text if len(text) <= CONTENT_CHARS else text[:CONTENT_CHARS] + f"… [{len(text)} chars]"


def traceparent() -> str | None:
    """The current span as a W3C ``traceparent`` (to store beside work that continues it
    later), or None when there is none."""
    if _tracer is None:
        return None
    found = trace.get_current_span().get_span_context()
    if not found.is_valid:
        return None
    return f"00-{found.trace_id:032x}-{found.span_id:016x}-{int(found.trace_flags):02x}"


def current_trace_id() -> str | None:
    """The trace id of the current span (for log lines), or None outside one."""
    if _tracer is None:
        return None
    found = trace.get_current_span().get_span_context()
    return f"{found.trace_id:032x}" if found.is_valid else None


def _span_context(parent: str) -> trace.SpanContext | None:
    found = trace.get_current_span(_PROPAGATOR.extract({"traceparent": parent})).get_span_context()
    return found if found.is_valid else None


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        out[key] = value if isinstance(value, str | bool | int | float) else str(value)
    return out


class _QuietExporter:
    """Wraps the OTLP exporter: a failure is one log line a minute, never an exception."""

    def __init__(self, inner: SpanExporter, *, interval: float = FAILURE_LOG_INTERVAL):
        self.inner = inner
        self.interval = interval
        self._lock = threading.Lock()
        self._last_logged = 0.0
        self._failed = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.inner.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.FAILURE:
            self._note_failure(len(spans))
        return result

    def _note_failure(self, count: int) -> None:
        with self._lock:
            self._failed += count
            if not self._due_locked():
                return
            dropped, self._failed = self._failed, 0
        log.warning("the trace collector did not take %d spans; they are dropped", dropped)

    def due(self) -> bool:
        """Whether a line about failed exports may be logged now (it is then counted as logged)."""
        with self._lock:
            return self._due_locked()

    def _due_locked(self) -> bool:
        now = time.monotonic()
        if self._last_logged and now - self._last_logged < self.interval:
            return False
        self._last_logged = now
        return True

    def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def keep(conn: sqlite3.Connection, kind: str, key: int, parent: str | None) -> None:
    """Store ``parent`` as the span later work on ``(kind, key)`` continues (inside the
    caller's transaction); nothing when spans are off or there is no parent."""
    if parent is not None and _tracer is not None:
        span_contexts.save(conn, kind, key, parent, now=time.time(), keep_seconds=_keep_seconds)
        with _recent_lock:
            _recent[(kind, key)] = parent
            if len(_recent) > RECENT:
                _recent.popitem(last=False)


def recent(kind: str, key: int) -> str | None:
    """What :func:`keep` stored for ``(kind, key)`` lately, without reading the store (None
    when it was long ago or before a restart: then read :mod:`gateway.store.span_contexts`)."""
    with _recent_lock:
        return _recent.get((kind, key))


def parents(conn: sqlite3.Connection, kind: str, keys: Sequence[int]) -> list[str]:
    """The spans stored for ``keys`` of ``kind`` (:func:`keep`); none when spans are off."""
    if _tracer is None or not keys:
        return []
    return span_contexts.parents(conn, kind, keys)


def current_span() -> Span:
    """The current span (a non-recording one outside any, or when spans are off)."""
    return INVALID_SPAN if _tracer is None else trace.get_current_span()
