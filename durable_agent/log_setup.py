"""structlog for processes we start: readable on a terminal, JSON lines in production."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(level: str = "info", *, json_lines: bool = False) -> None:
    """Route our structlog loggers to stderr at ``level``. Secrets never reach a log
    line: we log names, ids and counts, never keys, headers or message bodies."""
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
