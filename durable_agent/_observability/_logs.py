"""structlog for processes we start: readable on a terminal, JSON lines in production.

Two sources end in the same lines: our structlog loggers (activities bind the session,
turn, attempt and agent as context variables, ``activities/observing.py``) and the
standard library's, where temporalio's replay-safe ``workflow.logger`` writes (the
workflow passes the same fields as ``extra``, ``workflows/session_log.py``)."""

from __future__ import annotations

import logging
import re
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


#: Fields of our lines that may quote what a user or a model wrote: an error's text (a
#: tool's exception naming its input, a refusal quoting an edit), a reason, a text.
TEXT_FIELDS = frozenset(
    {"error", "text", "reason", "content", "arguments", "detail", "why", "message"}
)
_TEXT_ARGUMENT = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sra]")
_KIND = re.compile(r"([A-Za-z_][\w.]*(?:Error|Exception|Timeout|Failed|Refused)): ")


def _withheld(value: str) -> str:
    """A text as a line may show it with the codec on: its kind (an exception's type
    name, which is code) and its size."""
    kind = _KIND.match(value)
    prefix = f"{kind.group(1)}: " if kind else ""
    return f"{prefix}<{len(value)} characters withheld>"


def withhold_text(
    logger: object, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """The line without what users or models wrote: with codec keys on, history and
    the store hold it encrypted, and a log line must not hold it in plaintext. Our
    lines keep their ids, kinds and sizes; a library's line (temporalio's, the
    workflows' own) keeps its message with its text arguments withheld; a traceback
    becomes its exception's type name (its text quotes the failing input)."""
    record = event.get("_record")
    for name in TEXT_FIELDS & event.keys():
        if isinstance(event[name], str) and not (record is not None and name == "message"):
            event[name] = _withheld(event[name])
    if record is not None and isinstance(record.msg, str) and event.get("event") != record.msg:
        event["event"] = _TEXT_ARGUMENT.sub("<withheld>", record.msg)
    exc_info = event.pop("exc_info", None)
    if exc_info:
        if exc_info is True:
            exc_info = sys.exc_info()
        if isinstance(exc_info, BaseException):
            event["exception_kind"] = type(exc_info).__name__
        elif isinstance(exc_info, tuple) and exc_info[0] is not None:
            event["exception_kind"] = exc_info[0].__name__
    return event


def configure_logging(
    level: str = "info",
    *,
    json_lines: bool = False,
    once: bool = False,
    withhold: bool = False,
) -> None:
    """Route our structlog loggers and the standard library's to stderr at ``level``.
    Secrets never reach a log line: we log names, ids and counts, never keys, headers
    or message bodies. ``once``: the process configures logging this once, before it
    logs (a worker): each logger is built on first use and kept, not built again for
    every activity that binds it (about 1% of a busy worker's CPU). ``withhold``: no
    line holds what users or models wrote (``withhold_text``), for a worker whose
    payloads are encrypted (``durable-agent worker`` turns it on with codec keys)."""
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
    if withhold:
        shared.append(withhold_text)
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
