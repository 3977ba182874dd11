"""Seeing inside a running worker: traces and metrics, the GenAI spans of model and tool
calls, structured logs, and a session's timeline read back from its history.

Import each name from the module that defines it: a process loads only what it uses."""
