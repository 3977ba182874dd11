"""What people send a session between its steps (signals and updates record only): a
message to queue, a move to another agent, the end, a flush, a new budget. Each is kept
for the Session to act on at its next checkpoint, or refused visibly in ``status``."""

from __future__ import annotations

from datetime import datetime

from durable_agent._contracts.boundary import (
    BudgetSignal,
    EndSessionSignal,
    FlushSignal,
    MoveToAgentSignal,
)
from durable_agent._contracts.wake_ups import WAKE_UP_SOURCE
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import (
    AssistantMessage,
    FlushMessage,
    SystemMessage,
    TextPart,
    UserMessage,
)
from durable_agent._wire.transcript import Transcript, kept_apart

from .gate import Gate
from .model_step import Budget
from .state import RequestsState, epoch_ms
from .toolbox import Swarm

MAX_REJECTED_SIGNALS_KEPT = 50


def text_size(message: UserMessage) -> int:
    """The characters of a message's text: its string, or its text parts (images and
    files are not characters; a payload store carries them)."""
    if isinstance(message.content, str):
        return len(message.content)
    return sum(len(part.text) for part in message.content if isinstance(part, TextPart))


class Requests:
    """Records requests into its slice of the carried state until the Session takes
    them at a checkpoint; answers why one was refused."""

    def __init__(
        self,
        spec: AgentSpec,
        state: RequestsState,
        swarm: Swarm | None,
        budget: Budget,
        gate: Gate,
    ) -> None:
        self.spec = spec
        self.state = state
        self.swarm = swarm
        self.budget = budget
        self.gate = gate

    def _identity_problem(self, by: str | None, what: str) -> str | None:
        """Moves and budget raises change what the session may do, as decisions do: the
        same people decide them (an unsigned name counts only where no list applies)."""
        problem: str | None = self.gate.identity_problem(
            by, self.spec.approvals.approvers, False, what
        )
        return problem

    def message_arrived(self, message: UserMessage, now: datetime) -> str | None:
        """Queue a user message for the next turn boundary; why it was rejected, if it was."""
        problem = self.message_problem(message)
        if problem is not None:
            return self.reject(problem)
        stamped: dict[str, object] = {"timestamp": epoch_ms(now), "mode": message.mode or "user"}
        if message.source == WAKE_UP_SOURCE:  # only the session's wake-ups are marked so
            stamped["source"] = None
        self.state.inbox.append(kept_apart(message).model_copy(update=stamped))
        return None

    def message_problem(self, message: UserMessage) -> str | None:
        """Why a message cannot be queued (the update's validator asks too)."""
        empty = message.content in ("", [])
        size = text_size(message)
        problem = self._queue_problem("send_message", empty, size)
        model = self.spec.model if self.swarm is None else self.swarm.model  # who answers
        refused = model.refuses(message)
        return problem or (f"send_message: {refused}" if refused else None)

    def _queue_problem(self, entry: str, empty: bool, size: int | None) -> str | None:
        """What every message sent to the session is checked for: some text, within
        ``max_message_chars``, and a session that is not ending. (Any id is accepted:
        ``kept_apart`` keeps it from naming another message.)"""
        limit = self.spec.session.max_message_chars
        if empty:
            return f"{entry}: empty message"
        if size is not None and size > limit:
            return f"{entry}: {size} characters is over the limit of {limit}"
        if self.state.ending is not None:
            return f"{entry}: the session is ending"
        return None

    def inject_arrived(
        self, message: SystemMessage | AssistantMessage, now: datetime
    ) -> str | None:
        """Queue a system notice or an assistant message for the array's next checkpoint
        (between turns, or before the next model call: never inside a tool batch); why
        it was rejected, if it was."""
        problem = self.inject_problem(message)
        if problem is not None:
            return self.reject(problem)
        stamped = {"timestamp": epoch_ms(now), "mode": message.mode or "tool"}
        self.state.injected.append(kept_apart(message).model_copy(update=stamped))
        return None

    def inject_problem(self, message: SystemMessage | AssistantMessage) -> str | None:
        """Why a message cannot be injected (the update's validator asks too)."""
        text = (
            message.content
            if isinstance(message.content, str)
            else "".join(part.text for part in message.content)
        )
        if isinstance(message, AssistantMessage) and message.tool_calls:
            return "inject_message: an assistant message with tool calls would have no results"
        return self._queue_problem("inject_message", not text.strip(), len(text))

    def move_requested(self, request: MoveToAgentSignal) -> str | None:
        """A person moves a swarm session to another agent (at the next checkpoint)."""
        if self.swarm is None:
            return self.reject("move_to_agent: this session has one agent")
        rejection = self.swarm.move_rejection(request, self.state.move is not None)
        if rejection is None:
            rejection = self._identity_problem(request.by, f"move_to_agent {request.agent}")
        if rejection is not None:
            return self.reject(rejection)
        self.state.move = request
        return None

    def end_requested(self, request: EndSessionSignal) -> None:
        if self.state.ending is None:
            self.state.ending = request

    def flush_requested(self, request: FlushSignal) -> None:
        """A flush marker joins the array once the current turn is over."""
        self.state.flushes.append(request)

    def budget_changed(self, request: BudgetSignal) -> str | None:
        """A new budget; one that raises a limit is decided by the same people as
        approvals (lowering one is anyone's to ask)."""
        problem = None
        if self.budget.raises(request):
            problem = self._identity_problem(request.by, "set_budget (a raise)")
        problem = problem or self.budget.change_problem(request)
        return None if problem is None else self.reject(problem)

    def apply_flushes(self, messages: Transcript, now: datetime) -> None:
        """The flushes asked for join the array (the Session calls this between turns)."""
        at = epoch_ms(now)
        for request in self.state.flushes:
            messages.join(
                FlushMessage(by=request.by, reason=request.reason, mode="user", timestamp=at)
            )
        self.state.flushes.clear()

    # --- the calls that wait, and the Session taking it ---------------------------------------

    @property
    def inbox(self) -> list[UserMessage]:
        """Messages waiting for the next turn boundary (read it; ``take_*`` empties it)."""
        return self.state.inbox

    @property
    def ending(self) -> EndSessionSignal | None:
        """Someone asked the session to end."""
        return self.state.ending

    @property
    def move(self) -> MoveToAgentSignal | None:
        """A person's move waiting for the next checkpoint."""
        return self.state.move

    @property
    def rejected_signals(self) -> list[str]:
        return self.state.rejected_signals

    def waiting(self) -> bool:
        """Something waits for a checkpoint: a message, an injection, a flush, a move."""
        state = self.state
        return bool(state.inbox or state.injected or state.flushes or state.move)

    def flushes_waiting(self) -> int:
        return len(self.state.flushes)

    def queue(self, message: UserMessage) -> None:
        """A message the Session itself queues (a fresh session's first, to be checked)."""
        self.state.inbox.append(message)

    def take_next_message(self) -> UserMessage:
        """The oldest queued message, for its input guardrails to check."""
        return self.state.inbox.pop(0)

    def take_inbox(self) -> list[UserMessage]:
        """Every queued message, in the order they arrived."""
        taken, self.state.inbox = self.state.inbox, []
        return taken

    def take_injected(self) -> list[SystemMessage | AssistantMessage]:
        if not self.state.injected:  # (asked at every checkpoint: most find none)
            return []
        taken, self.state.injected = self.state.injected, []
        return taken

    def take_move(self) -> MoveToAgentSignal | None:
        move, self.state.move = self.state.move, None
        return move

    def reject(self, text: str) -> str:
        """Keep a signal that changed nothing visible in ``status``; returns the text."""
        self.state.rejected_signals = [*self.state.rejected_signals, text][
            -MAX_REJECTED_SIGNALS_KEPT:
        ]
        return text
