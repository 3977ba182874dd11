"""Reaching a Temporal server and naming worker versions: what the client and the
worker both need, below both, so that a client process loads no worker.

Import each name from the module that defines it: a process loads only what it uses."""
