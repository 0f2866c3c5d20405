"""Log records that say which run they belong to, written as text or as JSON lines.

While a run is driven (each step of its iterator, see :class:`~bread_sync.runs.Run`),
:data:`current_run` holds its :class:`RunLabels`. It is a context variable, so it belongs to one
thread, and to one greenlet under gevent: runs driven side by side never see each other's.
:class:`RunIdFilter` copies them onto each record (``run_id``, ``session_id``, ``agent_id``, and
``trace_id`` and ``span_id`` when the run is traced).
:func:`configure` gives the ``bread_sync`` loggers one handler with that filter, in the format
``BREAD_LOG_FORMAT`` names (``text``, the default, or ``json``); the server calls it in each
worker.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import IO, Any, NamedTuple


class RunLabels(NamedTuple):
    """What a log record made while a run is driven says of the run."""

    run_id: str
    session_id: str | None = None
    #: The agent (or pipeline) the run runs.
    agent_id: str | None = None
    #: Its :class:`bread_sync.tracing.RunTrace` when tracing is on: a record made while the run
    #: is driven names the trace and the span it was made in.
    trace: Any = None


current_run: ContextVar[RunLabels | None] = ContextVar("bread_run", default=None)
#: The record attributes a run's labels fill, in the order a JSON line lists them.
LABELS = ("run_id", "session_id", "agent_id")
#: The record attributes a traced run's labels fill: the span open when the record was made.
TRACE_LABELS = ("trace_id", "span_id")

TEXT_FORMAT = "%(asctime)s [%(process)d] [%(levelname)s] %(name)s [run %(run_id)s]: %(message)s"
LOGGERS = ("bread_sync",)


@contextmanager
def run_context(labels: RunLabels) -> Iterator[None]:
    """Within the block, log records carry the run's labels."""
    token = current_run.set(labels)
    try:
        yield
    finally:
        current_run.reset(token)


class BoundRun:
    """An iterator of a run's crumbs that drives each step with the run's labels current."""

    def __init__(self, labels: RunLabels, crumbs: Iterator[Any]):
        self.labels = labels
        self._crumbs = crumbs

    def __iter__(self) -> BoundRun:
        return self

    def __next__(self) -> Any:
        # Set and reset by hand: a context manager per crumb costs more than the crumb's log write.
        token = current_run.set(self.labels)
        try:
            return next(self._crumbs)
        finally:
            current_run.reset(token)

    def close(self) -> None:
        close = getattr(self._crumbs, "close", None)
        if close is not None:
            with run_context(self.labels):  # a closed run still logs how it was abandoned
                close()


class RunIdFilter(logging.Filter):
    """Sets ``record.run_id``, ``session_id`` and ``agent_id``: those of the run being driven
    when the record was made, or None (one the record was given is kept)."""

    def filter(self, record: logging.LogRecord) -> bool:
        given = getattr(record, "run_id", None) is not None
        labels = None if given else current_run.get()
        for name, value in zip(LABELS, _labels_of(record), strict=True):
            setattr(record, name, value)
        if not given:
            trace = labels.trace if labels is not None else None
            record.trace_id, record.span_id = trace.ids() if trace is not None else _NO_TRACE
        return True


_NO_RUN = (None,) * len(LABELS)
_NO_TRACE = (None, None)


def _labels_of(record: logging.LogRecord) -> tuple[str | None, ...]:
    """The labels a record was given (one with a ``run_id``), else the run being driven's."""
    if getattr(record, "run_id", None) is not None:
        return tuple(getattr(record, name, None) for name in LABELS)
    labels = current_run.get()
    return labels[:3] if labels is not None else _NO_RUN


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "run_id", None) is None:
            record.run_id = "-"
        return super().format(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, process, run_id, session_id and
    agent_id (when driving a run), trace_id and span_id (when that run is traced; set by
    :class:`RunIdFilter`) and exception (a formatted traceback, when there is one)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        entry.update((name, value) for name, value in zip(LABELS, _labels_of(record), strict=True) if value)
        entry.update((name, value) for name in TRACE_LABELS if (value := getattr(record, name, None)))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


FORMATTERS = {"text": TextFormatter, "json": JsonFormatter}


def log_format(name: str | None = None) -> str:
    """``name``, else ``BREAD_LOG_FORMAT``, else ``text``; checked."""
    chosen = (name or os.environ.get("BREAD_LOG_FORMAT") or "text").lower()
    if chosen not in FORMATTERS:
        raise ValueError(f"BREAD_LOG_FORMAT must be one of {', '.join(FORMATTERS)}, not {chosen!r}")
    return chosen


def configure(fmt: str | None = None, stream: IO[str] | None = None, level: int = logging.INFO) -> logging.Handler:
    """Give the ``bread_sync`` loggers one handler (replacing one this function added before)
    that writes to ``stream`` (stderr) in ``fmt`` with the run id. Returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(RunIdFilter())
    handler.setFormatter(FORMATTERS[log_format(fmt)]())
    handler.bread_sync = True  # type: ignore[attr-defined]
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if getattr(h, "bread_sync", False)]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False  # said once, here, not again by the root logger
    return handler


def reformat(logger: logging.Logger, fmt: str | None = None) -> None:
    """Write ``logger``'s records (gunicorn's, say) in ``fmt`` too, when that is JSON."""
    if log_format(fmt) != "json":
        return
    for handler in logger.handlers:
        handler.addFilter(RunIdFilter())
        handler.setFormatter(JsonFormatter())
