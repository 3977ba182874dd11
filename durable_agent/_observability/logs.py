"""structlog for processes we start: readable on a terminal, JSON lines in production.

Two sources end in the same lines: our structlog loggers (activities bind the session,
turn, attempt and agent as context variables, ``activities/running.py``) and the
standard library's, where temporalio's replay-safe ``workflow.logger`` writes (the
workflow passes the same fields as ``extra``, ``workflows/telemetry.py``)."""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from urllib.parse import urlsplit

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


#: With the codec on, the only fields a line keeps: values no user or model wrote. Each
#: name means one thing wherever it is used, so a call site that logs something else
#: must pick another name (which is then withheld). Names of things the system makes or
#: the worker's owner registered keep their text: ids, kinds, the owner's endpoints,
#: task queues, tool modules and environment variable names.
SHOWN_NAMES = frozenset(
    {
        # what every line has
        *("event", "level", "timestamp", "logger", "exception_kind"),
        # ids the system makes
        *("run_id", "activity_id", "call_id", "approval_id"),
        *("ids", "idempotency_key", "memo_key", "stored_as"),
        # kinds: code's names, and names the worker's owner registered
        *("activity", "phase", "kind", "lacks", "calls", "registered_tool"),
        *("endpoint", "variable", "task_queue", "tools", "trusted_spec_fields"),
    }
)
#: Fields a line keeps when their value is a number or a yes/no (counts, sizes, status
#: codes, positions, durations): any text under one of these names is withheld.
SHOWN_NUMBERS = frozenset(
    {
        *("turn", "attempt", "messages", "chars", "kept", "sent", "left_out", "tool_calls"),
        *("at", "until", "files", "bytes", "size", "status_code", "retryable", "redelivery"),
        *("in_flight", "finished_while_draining", "handed_over"),
        *("seconds", "drain_seconds", "wait_seconds", "duration_ms"),
    }
)
#: Fields whose value a caller may choose (a session's id can be a client's conversation
#: id; a swarm agent's name can come from a starter's spec): a line keeps a digest of it,
#: the same for the same value, so lines still group by session without the text.
DIGESTED_NAMES = frozenset({"session_id", "workflow_id", "parent_session_id", "agent"})
#: Fields holding a URL: a line keeps its scheme and host (``scheme://host[:port]``),
#: never its path, query or user part, which may be what a user typed.
URL_NAMES = frozenset({"url", "origin", "base_url"})
#: What a log record carries for the formatter, taken out before the line is written.
_META = frozenset({"_record", "_from_structlog"})
_TEXT_ARGUMENT = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sra]")
_KIND = re.compile(r"([A-Za-z_][\w.]*(?:Error|Exception|Timeout|Failed|Refused)): ")


def _withheld(value: str) -> str:
    """A text as a line may show it with the codec on: its kind (an exception's type
    name, which is code) and its size."""
    kind = _KIND.match(value)
    prefix = f"{kind.group(1)}: " if kind else ""
    return f"{prefix}<{len(value)} characters withheld>"


def _hidden(name: str, value: object) -> str:
    """Any value of a field not on the allowlist: its type and size, never its text.
    Only an ``error`` keeps the exception type its text starts with."""
    if isinstance(value, str):
        return _withheld(value) if name == "error" else f"<{len(value)} characters withheld>"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return f"<{type(value).__name__} of {len(value)} withheld>"
    return f"<{type(value).__name__} withheld>"


def digest_of(value: str) -> str:
    """How a line shows a value a caller chose (``DIGESTED_NAMES``): ``#`` and twelve hex
    digits of its SHA-256, which an operator can compute for an id they know."""
    return "#" + hashlib.sha256(value.encode()).hexdigest()[:12]


def _plain(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float))


def _shown(name: str, value: object) -> bool:
    if name in SHOWN_NUMBERS:
        return _plain(value)
    if name not in SHOWN_NAMES:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_plain(v) or isinstance(v, str) for v in value)
    return _plain(value) or isinstance(value, str)


def _origin(value: object) -> str | None:
    """``scheme://host[:port]`` of a URL, or ``None`` when it has none."""
    if not isinstance(value, str):
        return None
    try:
        parts = urlsplit(value)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not parts.scheme or not host:
        return None
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def withhold_text(
    logger: object, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """The line without what users or models wrote: with codec keys on, history and
    the store hold it encrypted, and a log line must not hold it in plaintext. A line
    keeps only the fields named in ``SHOWN_NAMES``, ``SHOWN_NUMBERS`` (numbers only)
    and ``URL_NAMES`` (scheme and host only); any other field, one added later too, is
    replaced by its type and size. A library's line (temporalio's, the workflows' own)
    keeps its message with its text arguments withheld; a traceback becomes its
    exception's type name (its text quotes the failing input)."""
    record = event.get("_record")
    exc_info = event.pop("exc_info", None)
    if exc_info:
        if exc_info is True:
            exc_info = sys.exc_info()
        if isinstance(exc_info, BaseException):
            event["exception_kind"] = type(exc_info).__name__
        elif isinstance(exc_info, tuple) and exc_info[0] is not None:
            event["exception_kind"] = exc_info[0].__name__
    if record is not None:
        # the library's own words stay; what it was given to format does not
        message = record.msg
        if isinstance(message, str):
            event["event"] = _TEXT_ARGUMENT.sub("<withheld>", message) if record.args else message
        else:
            event["event"] = _hidden("event", str(message))
    for name in list(event):
        value = event[name]
        if name in _META or (name == "event" and record is not None) or _shown(name, value):
            continue
        if name in URL_NAMES:
            event[name] = _origin(value) or _hidden(name, value)
        elif name in DIGESTED_NAMES and isinstance(value, str):
            event[name] = digest_of(value)
        else:
            event[name] = _hidden(name, value)
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
    line holds what users or models wrote (``withhold_text``: only allowed fields are
    shown), for a process whose payloads are encrypted (``durable-agent worker`` and
    ``durable-agent serve`` turn it on with codec keys)."""
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
