"""A run that opens a session (rather than one continued as new): its tools resolved,
its conversation opened (read back from the session's ended run when it resumes one,
from the session it branches from, or from its own start when a long history came
apart from its input), and its title set. Deterministic workflow code.

What people send a session (its start input and signals) is read here too, without
trusting it: a bad payload becomes a clear, visible rejection."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStreamState
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.boundary import ClosedRunInput, ForkInput, StartedHistoryInput
    from durable_agent._errors import DurableAgentError, Failure
    from durable_agent._session import Session, SessionState
    from durable_agent._session.protocol import SubAgentsAdded, ToolsAdded, ToolsResolved
    from durable_agent._spec.document import AgentInput
    from durable_agent._wire.messages import explain, session_title

    from .continuation import ContinuedInput
    from .tool_calls import list_remote_tools, resolve_tools
    from .transcript_sync import TranscriptSync


def run_state(request: AgentInput | ContinuedInput) -> SessionState:
    """The state a run starts from: the one carried, or a new session's."""
    if isinstance(request, ContinuedInput):
        return request.carried
    return new_session_state()


def new_session_state() -> SessionState:
    """A new session's state: in the newest transcript chain, and with message ids (a
    session opened before either keeps what it had for its life)."""
    return SessionState(chain=2, message_ids=True)


def events_carried(request: AgentInput | ContinuedInput) -> WorkflowStreamState | None:
    """Where the run's live events go on from: the previous run's state after
    continue-as-new, the ended run's last offset when resuming, else nothing."""
    if isinstance(request, ContinuedInput):
        return request.events
    if request.resume is not None:
        return WorkflowStreamState(base_offset=request.resume.events_offset)
    return None


def reading_back(request: AgentInput | ContinuedInput) -> int:
    """How many messages the run reads back before it opens."""
    if isinstance(request, ContinuedInput):
        ref = request.carried.transcript
        return ref.count if ref is not None else 0
    if request.fork is not None:
        return request.fork.at
    if request.earlier:
        return request.earlier
    return request.resume.message_count if request.resume is not None else 0


async def open_run(session: Session, request: AgentInput, sync: TranscriptSync) -> bool:
    """Resolve the tools, open the conversation and title the session; ``True`` when
    the title waits for the first message (one sent with update-with-start)."""
    await resolve_tools_of(session)
    chain = session.view.loop.chain  # what is read back is stored in the session's chain
    if request.resume is not None:
        summary = f"closed_conversation of run {request.resume.run_id}"
        closed = ClosedRunInput(run_id=request.resume.run_id, chain=chain)
        await sync.load(await sync.read_back("closed_conversation", closed, summary))
    elif request.fork is not None:  # (new: no recorded run took this path)
        fork = request.fork
        summary = f"forked_conversation of {fork.session_id} at {fork.at}"
        branch = ForkInput(fork=fork, instructions=session.spec.instructions, chain=chain)
        await sync.load(await sync.read_back("forked_conversation", branch, summary))
    elif request.earlier:  # a long history sent apart (new: as the fork)
        first = session.view.opening_message(workflow.now())
        started = StartedHistoryInput(count=request.earlier, first=first, chain=chain)
        summary = f"started_conversation {request.earlier} messages"
        await sync.load(await sync.read_back("started_conversation", started, summary))
    session.start(request, workflow.now())
    title = session_title(session.messages)
    # a session started without a message (update-with-start brings it) is titled by
    # its first message when that arrives
    if title:
        if not _titled_at_start(title):
            workflow.upsert_memo({"title": title})
        return False
    return True


def _titled_at_start(title: str) -> bool:
    """The start's memo holds this very title (``AgentClient.start`` puts it there): the
    run need not upsert it. Any other memo title (a start by other means, a prediction
    the run's own opening proved wrong, a value that is not text) is upserted over."""
    if not title:
        return False
    try:
        return bool(workflow.memo_value("title", "", type_hint=str) == title)
    except Exception:  # not text: the run's own title goes over it
        return False


async def resolve_tools_of(session: Session) -> None:
    """The spec's tools, guardrails, hooks, toolsets and sub-agents as the workers have
    them, told to the Session; fails the run if any is missing or named twice."""
    spec = session.spec
    names, guards = session.view.tool_names_to_resolve(), spec.guardrails
    hooks = spec.approval_hooks()
    if names or guards.input or guards.output or hooks:
        guardrails = sorted({*guards.input, *guards.output})
        found = await resolve_tools(names, guardrails, hooks, spec.session)
        problem = session.handle(ToolsResolved(found), workflow.now())
        if problem:
            raise ApplicationError(problem, type=Failure.UNKNOWN_TOOL, non_retryable=True)
    if spec.toolsets:
        added = ToolsAdded(await list_remote_tools(spec))
        problem = session.handle(added, workflow.now())
        if problem:
            raise ApplicationError(problem, type=Failure.DUPLICATE_TOOL, non_retryable=True)
    if spec.agents:
        problem = session.handle(SubAgentsAdded(), workflow.now())
        if problem:
            raise ApplicationError(problem, type=Failure.DUPLICATE_TOOL, non_retryable=True)


# Reading what people send a session (its start input and signals) without trusting it.
#
# Inputs arrive raw and are validated here, so a bad payload becomes a clear, visible
# rejection (a failed start naming each field, or an entry in ``status``) instead of a
# workflow task that fails and retries for ever, or a signal the SDK drops silently.

class InvalidInput(DurableAgentError, ValueError):
    """The payload could not be read as what it should be; the text says why."""


def decode(raw: RawValue, as_type: Any) -> Any:
    """The payload as ``as_type``, or ``InvalidInput`` naming each bad field."""
    try:
        return workflow.payload_converter().from_payload(raw.payload, as_type)
    except Exception as error:  # invalid JSON, bad UTF-8, wrong fields or types
        raise InvalidInput(explain(error)) from None


def decode_start(raw: RawValue) -> AgentInput | ContinuedInput:
    """A run's input: a fresh session as users write it, or the state a previous run of
    the same session handed over (``carried``).

    One pass from JSON to the model when the bytes say which it is: a continued run's
    input that names ``carried``, or an input that names it nowhere. (Two passes, JSON
    to a dict and the dict to the model, took half as long again for a start carrying
    10,000 messages, in one workflow task.) Anything else, and an input that does not
    read in one pass, takes the two, which name each bad field."""
    named = b'"carried"' in raw.payload.data
    continued = workflow.info().continued_run_id is not None
    guess: type[AgentInput | ContinuedInput] | None = (
        AgentInput if not named else ContinuedInput if continued else None
    )
    if guess is not None:
        try:
            read: AgentInput | ContinuedInput = workflow.payload_converter().from_payload(
                raw.payload, guess
            )
            return read
        except ValueError:  # not what it seemed: the checked path says why
            pass
    return _decode_start_checked(raw)


def _decode_start_checked(raw: RawValue) -> AgentInput | ContinuedInput:
    data: dict[str, Any] = decode(raw, dict[str, Any])
    try:
        if data.get("carried") is not None:
            return ContinuedInput.model_validate(data)
        data.pop("carried", None)
        return AgentInput.model_validate(data)
    except ValidationError as error:
        raise InvalidInput(explain(error)) from None
