"""structlog for processes we start: readable on a terminal, JSON lines in production.

Two sources end in the same lines: our structlog loggers (activities bind the session,
turn, attempt and agent as context variables, ``activities/observing.py``) and the
standard library's, where temporalio's replay-safe ``workflow.logger`` writes (the
workflow passes the same fields as ``extra``, ``workflows/session_log.py``)."""

from __future__ import annotations

import logging
import sys

import structlog

#: Fields a workflow's log record carries from its ``extra`` into the line.
RECORD_FIELDS = ("session_id", "run_id", "turn", "attempt", "agent", "phase")


def _record_fields(
    logger: object, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    record = event.get("_record")
    if record is not None:
        for name in RECORD_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                event.setdefault(name, value)
    return event


def configure_logging(level: str = "info", *, json_lines: bool = False, once: bool = False) -> None:
    """Route our structlog loggers and the standard library's to stderr at ``level``.
    Secrets never reach a log line: we log names, ids and counts, never keys, headers
    or message bodies. ``once``: the process configures logging this once, before it
    logs (a worker): each logger is built on first use and kept, not built again for
    every activity that binds it (about 1% of a busy worker's CPU)."""
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    numeric = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=once,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, _record_fields],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(max(numeric, logging.WARNING))  # libraries: warnings and worse
    logging.getLogger("temporalio.workflow").setLevel(numeric)  # the workflows' own lines
