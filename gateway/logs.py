"""Logging: text or one JSON object per line, with thread/run ids (and the OpenTelemetry
trace id inside a span), secrets redacted."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import sys
import time
from collections.abc import Iterable
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import IO

from gateway import otel
from gateway.config import Settings
from gateway.errors import TransientError

thread_id_var: contextvars.ContextVar[int | None] = contextvars.ContextVar("thread_id", default=None)
run_id_var: contextvars.ContextVar[int | None] = contextvars.ContextVar("run_id", default=None)

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


class ContextFilter(logging.Filter):
    """Adds the current thread and run ids (and trace id), and masks every configured secret."""

    def __init__(self, secrets: Iterable[str] = ()):
        super().__init__()
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "thread_id", None) is None:
            record.thread_id = thread_id_var.get()
        if getattr(record, "run_id", None) is None:
            record.run_id = run_id_var.get()
        if getattr(record, "trace_id", None) is None:
            record.trace_id = otel.current_trace_id()
        if self.secrets:
            message = record.getMessage()
            masked = self.mask(message)
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = self.mask(record.exc_text)
            if masked != message:
                record.msg, record.args = masked, ()
        return True

    def mask(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and value is not None:
                out[key] = value
        if record.exc_info or record.exc_text:
            out["exc"] = record.exc_text or self.formatException(record.exc_info)  # type: ignore[arg-type]
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        ids = "".join(
            f" {k}={getattr(record, k)}"
            for k in ("thread_id", "run_id", "trace_id")
            if getattr(record, k, None) is not None
        )
        line = f"{stamp} {record.levelname:<7} {record.name}{ids}: {record.getMessage()}"
        if record.exc_info or record.exc_text:
            line += "\n" + (record.exc_text or self.formatException(record.exc_info))  # type: ignore[arg-type]
        return line


class OwnerOnlyFileHandler(RotatingFileHandler):
    """A size-bounded log file, created (and re-created on rotation) mode 600."""

    def _open(self) -> IO[str]:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)  # a file left by an older version or another umask
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)


def log_retried(logger: logging.Logger, exc: BaseException, message: str, *args: object) -> None:
    """Log a failure the caller retries: a :class:`~gateway.errors.TransientError` (another
    node's write conflicted, say) as a warning naming it, anything else as an error with its
    traceback, for that is a bug or an outage someone should look at."""
    if isinstance(exc, TransientError):
        logger.warning(message + ": %s", *args, exc)
    else:
        logger.error(message, *args, exc_info=exc)


def log_file_path(settings: Settings) -> Path | None:
    """Where the daemon keeps its log file (``talon logs`` reads it), or None when it keeps none."""
    path = settings.log_file.path
    return None if path is None else settings.data_path / path


def file_handler(settings: Settings) -> OwnerOnlyFileHandler | None:
    """The daemon's log file handler; the data dir must exist."""
    path = log_file_path(settings)
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    return OwnerOnlyFileHandler(
        path, maxBytes=settings.log_file.max_bytes, backupCount=settings.log_file.backups, encoding="utf-8"
    )


def setup_logging(
    level: str = "info",
    fmt: str = "text",
    secrets: Iterable[str] = (),
    *,
    log_file: logging.Handler | None = None,
) -> None:
    """Console logging on stderr, and into ``log_file`` too when given (in the same format)."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        handlers.append(log_file)
    masking = ContextFilter(secrets)
    for handler in handlers:
        handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
        handler.addFilter(masking)
    root = logging.getLogger()
    for old in root.handlers:
        if isinstance(old, OwnerOnlyFileHandler) and old is not log_file:
            old.close()
    root.handlers[:] = handlers
    root.setLevel(level.upper())
    # Library chatter at INFO would drown the gateway's own lines (and may echo URLs).
    for noisy in (
        "httpx",
        "httpx2",
        "httpcore",
        "telegram",
        "slack_bolt",
        "slack_sdk",
        "discord",
        "mcp",
        "anthropic",
        "openai",
    ):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
