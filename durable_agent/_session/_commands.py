"""What the Session asks the workflow to do next: one command at a time.

The Session decides; the workflow carries the command out (an activity, a durable
wait, continue-as-new, the end) and reports back with an event (a Session method).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, overload

from durable_agent._contracts._approval_contracts import EscalationNotice, TokenCheck
from durable_agent._contracts._contracts import AgentResult, GuardrailKind, ResolvedTool
from durable_agent._spec.tool_kinds._base import CallTarget, Placement
from durable_agent._wire._messages import ApprovalRecord, ToolCall


@dataclass(frozen=True)
class CallModel:
    """Ask the model for the next turn (number ``turn``)."""

    turn: int


@dataclass(frozen=True)
class Summarise:
    """Ask the summarising model for a summary of the array's first ``until`` messages
    (compaction, before model call ``turn``)."""

    turn: int
    until: int


@dataclass(frozen=True)
class CheckGuardrails:
    """Run these guardrails (an activity) on one text."""

    kind: GuardrailKind
    names: list[str]
    text: str


@dataclass(frozen=True)
class Pause:
    """Wait on a durable timer: before trying the model again (one of its attempts
    failed), or between two pages of a large batch's judging or of a grant's approvals
    (each page is then a workflow task of its own)."""

    delay: timedelta


@dataclass(frozen=True)
class CheckApprovals:
    """Ask predicates (an activity) about these calls: the tools' own, or the named ones
    of the spec's rules (``predicates``, one per call; ``None``: every call's tool's)."""

    calls: list[ToolCall]
    predicates: list[str | None] | None = None


@dataclass(frozen=True)
class DescribeCalls:
    """Ask the tools (an activity) for readable forms of calls that wait for a person."""

    calls: list[ToolCall]


@dataclass(frozen=True)
class VerifyTokens:
    """Have the workers check signed decisions (with keys only they hold)."""

    checks: list[TokenCheck]


@dataclass(frozen=True)
class NotifyEscalation:
    """Tell a second group that calls wait for them (an activity)."""

    notice: EscalationNotice


@dataclass(frozen=True)
class AwaitApprovals:
    """Wait for people's decisions on these approval ids (deadlines are durable timers)."""

    ids: list[str]


@dataclass(frozen=True)
class ToolRun:
    """One approved call: its slot in the batch, its tool as recorded, how it was approved,
    and the session context values bound to its parameters."""

    slot: int
    call: ToolCall
    tool: ResolvedTool
    approval: ApprovalRecord | None
    bound: dict[str, Any] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)
    """The session's secret names, when the call references any."""
    target: CallTarget | None = None
    """What the call needs besides its arguments, from its tool's kind (a sub-agent's
    spec, an MCP server, an operation; ``None`` for a function)."""
    runs_in: Placement = "worker"
    """Its kind's place: an activity, or a child session (a sub-agent)."""
    agent_name: str | None = None
    """The swarm agent that made the call (recorded on its result)."""


class ToolRuns(Sequence[ToolRun]):
    """A group's calls, each made into its ``ToolRun`` when asked for: a runner takes
    the next call when its own is done, so a batch of thousands costs each task the
    calls it starts, not the whole batch in the task that opens it. Not kept (each is
    made again if asked for again, equal): a run is let go with the call it made, not
    with its batch's thousands in the task after the last result."""

    def __init__(self, slots: Sequence[int], make: Callable[[int], ToolRun]) -> None:
        self._slots = slots
        self._make = make

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, index: int) -> ToolRun: ...
    @overload
    def __getitem__(self, index: slice) -> list[ToolRun]: ...

    def __getitem__(self, index: int | slice) -> ToolRun | list[ToolRun]:
        if isinstance(index, slice):
            return [self[k] for k in range(len(self))[index]]
        return self._make(self._slots[index])


@dataclass(frozen=True)
class RunTools:
    """Run these groups one after another; the calls of a group may overlap (in waves of
    at most ``max_concurrent``)."""

    turn: int
    groups: list[ToolRuns]
    max_concurrent: int


@dataclass(frozen=True)
class WaitForMessage:
    """Idle until a message, the end of the session, or a continue-as-new is due."""

    timeout: timedelta | None


@dataclass(frozen=True)
class ContinueAsNew:
    """Hand the session to a fresh run (the Session's state is what it carries);
    ``upgrade``: on the build the workers' owner made current, not this run's."""

    upgrade: bool = False


@dataclass(frozen=True)
class Finish:
    """The session is over."""

    result: AgentResult


Command = (
    CallModel
    | Summarise
    | CheckGuardrails
    | Pause
    | CheckApprovals
    | DescribeCalls
    | VerifyTokens
    | NotifyEscalation
    | AwaitApprovals
    | RunTools
    | WaitForMessage
    | ContinueAsNew
    | Finish
)
