"""The errors of durable-agent, in one tree: every one is a ``DurableAgentError``, and
each says what to do next."""

from __future__ import annotations


class DurableAgentError(Exception):
    """The root of durable-agent's errors: catch this to catch any of them."""


class NotRegistered(DurableAgentError, LookupError):
    """A name the worker's owner did not register; the message lists what is."""


class NotAllowed(DurableAgentError, PermissionError):
    """Something the spec carries that the worker's policy keeps from specs."""


class PayloadTooLarge(DurableAgentError, ValueError):
    """A payload over what Temporal takes (one message over the payload budget, or
    what a client would send, with no payload store); the message says what to do."""
