"""Talking to sessions from any process: ``AgentClient``, each session's
``SessionHandle``, and what they answer with.

Import each name from the module that defines it: a process loads only what it uses.

Its modules:

- ``sessions``: ``AgentClient``: start sessions, reach them, go on with ended ones.
- ``handle``: ``SessionHandle``: one session, as a client talks to it.
- ``reading``: queries that wait out a busy worker, and the live event log.
- ``results``: what the client hands back and raises, and what its parts share.
- ``schedules``: agents on Temporal Schedules.
- ``versions``: which worker build runs each session, and moving sessions to another.
- ``evals``: evaluations: start one, read its report."""
