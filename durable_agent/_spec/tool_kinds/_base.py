"""What every tool kind has in common.

A tool's kind decides how the tool is found when a session starts, what is recorded
about it (its ``ToolTarget``, kept with the tool in the session's state), what a call
of it needs besides its arguments (its ``CallTarget``), and where the call runs: on a
worker, as a child session, or in the session itself. Each kind is one module with its
target models and one ``ToolKind``; a worker has the kinds its ``Registry`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict

from durable_agent._errors import DurableAgentError
from durable_agent._wire._contract import Contract

Placement = Literal["worker", "child_session", "session"]
"""Where a kind's calls run: a ``run_tool`` activity on a worker, a child session (a
sub-agent), or the session itself (a swarm's handoff)."""


class UnknownToolKind(DurableAgentError, ValueError):
    """A worker has no kind of this name; the message lists the ones it has."""


class ToolsetError(DurableAgentError, RuntimeError):
    """A toolset that cannot be listed (its source unknown here, or the kind failed):
    the session fails at once, naming it."""


class CallTarget(Contract):
    """What one call of a tool needs besides its arguments (the kind's ``call`` model,
    or its recorded target when that is all a call needs)."""

    kind: str


class ToolTarget(CallTarget):
    """What a tool stands for, recorded when the session starts (the kind's own model)."""


class OtherTarget(ToolTarget):
    """A target of a kind that is not built in, as the session and the client read it:
    every field kept as it came. The worker whose ``Registry`` has the kind reads it as
    the kind's own model before a call runs."""

    model_config = ConfigDict(extra="allow", frozen=True)


@dataclass
class WorkerSide:
    """What a worker lends a kind for one call or listing: its owner's registrations
    (``durable_agent.capabilities.Capabilities``: the kinds are below it, so it is not
    named here), and a place to keep what is worth reading once per worker."""

    capabilities: Any
    memo: dict[str, Any] = field(default_factory=dict)


class FunctionTarget(ToolTarget):
    """A function a worker loaded (the ``function`` kind): the tool's name says it all."""

    kind: Literal["function"] = "function"
