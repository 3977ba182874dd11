"""Talking to sessions from any process: ``AgentClient``, each session's
``SessionHandle``, and what they answer with.

Import each name from the module that defines it: a process loads only what it uses."""
