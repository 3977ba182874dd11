"""What a tool batch holds while it is open: its calls and their slots, the page of
calls being judged, the approvals people were asked, and what its results ask of the
join. Data only; ``ToolBatch`` (``batch.py``) decides."""

from __future__ import annotations

from dataclasses import dataclass, field

from durable_agent._contracts._contracts import Handoff
from durable_agent._wire._messages import ApprovalRecord, ToolCall, ToolMessage

from ._gate import Question, Verdicts


@dataclass
class JudgedPage:
    """Calls ``start`` to ``stop`` of a batch, judged together: the predicates asked about
    them, the gate's verdicts, the calls that wait for a person and their readable forms.
    A batch of at most a page is one page; a larger one is judged one page per workflow task."""

    start: int
    stop: int
    questions: list[Question]
    """What predicates must answer before the gate can decide (asked once)."""
    verdicts: Verdicts | None = None
    waiting: list[int] = field(default_factory=list)
    """The page's calls that wait for a person, once gated."""
    descriptions: dict[int, str] | None = None
    """Readable forms of those calls, once described."""
    ended_a_task: bool = False
    """An activity (predicates, descriptions) ended a task in this page: the next page
    needs no timer of its own."""


@dataclass
class OpenBatch:
    """The open batch (the last assistant message's calls), as this run decides it.
    Not carried: a new run decides it again (approvals already asked keep their ids,
    deadlines and decisions, which the state carries)."""

    turn: int
    """The model turn whose reply asked for the calls (approval ids are made from it)."""
    calls: list[ToolCall]
    slots: list[ToolMessage | None]
    judged: int = 0
    """Calls judged so far, a page at a time (all of them, for a batch that runs
    unjudged)."""
    page: JudgedPage | None = None
    """The page being judged."""
    approvals: dict[int, ApprovalRecord] = field(default_factory=dict)
    rules: dict[int, str] = field(default_factory=dict)
    """The rule that asked for a person, by slot."""
    asked: dict[str, int] = field(default_factory=dict)
    """Approval id -> slot, as the pages' approvals were opened."""
    taken: int = 0
    """Of ``asked``, the decisions taken into the batch so far (one page per workflow task)."""
    decided: bool = False
    handoff: Handoff | None = None
    """Where the batch hands the conversation (a swarm), once its results are in."""
    unjudged: frozenset[str] | None = None
    """The tools called, when the gate let every call run unjudged (all slots wait for
    their run: nothing was decided call by call)."""
    noted: Noted | None = None
    """What the results placed so far ask of the join, noted as each was placed (from the
    batch's run on; a batch that never ran is noted when it finishes)."""


@dataclass
class Noted:
    """The results placed in a batch's slots, as the join needs them: how many, and the
    few it must look at again. A batch of thousands is then joined without a pass over
    its results in the task the last one arrives in."""

    filled: int = 0
    unstamped: list[int] = field(default_factory=list)
    """Slots the loop wrote (refused, denied, failed, cancelled): given the time then."""
    spent: list[int] = field(default_factory=list)
    """Slots whose result spent tokens on models (a sub-agent's)."""
    stops: list[int] = field(default_factory=list)
    """Slots whose result is a stop tool's (``stop.on_tools``), not an error."""


@dataclass(frozen=True)
class Joined:
    """A finished batch: its results in request order, where it hands the conversation,
    the results that spent tokens and the first stop tool's result."""

    results: list[ToolMessage]
    handoff: Handoff | None
    spent: list[ToolMessage]
    stop: ToolMessage | None
