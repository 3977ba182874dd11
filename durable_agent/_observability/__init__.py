"""Seeing inside a running worker: traces and metrics, the GenAI spans of model and tool
calls, structured logs, and a session's timeline read back from its history.

Import each name from the module that defines it: a process loads only what it uses.

Its modules:

- ``tracing``: OpenTelemetry for a process, the GenAI spans, the worker's metrics.
- ``logs``: structlog: readable on a terminal, JSON lines in production.
- ``timeline``: a session's timeline, read back from its Temporal history."""
