"""The ``WakeUps`` part: the session's wake-ups, as data in its state.

A wake-up is set by the model (the ``wake_ups`` tools, carried out here, in the
session) or by a starter (the ``set_wake_up`` update); both pass the same bounds, the
ones the worker's owner recorded with the tools when the session started. While the
session is idle it waits until the earliest due time (the workflow keeps that as a
durable timer, so a sleeping session holds no worker). At an idle checkpoint every
wake-up that is due becomes one message, marked as a wake-up, and starts a turn; one
that falls due during a turn or an approval wait is simply due at the next idle
checkpoint, so it is neither lost nor doubled. A repeating one then moves to its next
due time after now: firings missed while the session was busy or its workers were
down fire once, not once each. Times are the workflow's, given.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from durable_agent._contracts.wake_ups import (
    NOT_ENABLED,
    Refusal,
    WakeUp,
    WakeUpRequest,
    WakeUpsState,
    describe,
    epoch,
    fired,
    planned,
    request_from_tool,
    wake_up_message,
)
from durable_agent._spec.tool_kinds import ResolvedTool, WakeUpsTarget
from durable_agent._wire.messages import ToolCall, ToolMessage, UserMessage

from .gate import arguments_of, error_result


class WakeUps:
    def __init__(self, state: WakeUpsState, tools: Sequence[ResolvedTool]) -> None:
        self.state = state
        self._tools = tools
        self.changed = False
        """A starter set or cancelled one since the session last asked how long to wait:
        the wait is over, to be measured again."""

    @property
    def limits(self) -> WakeUpsTarget | None:
        """The bounds recorded with the session's wake-up tools (``None``: the agent has
        none, so nothing may set a wake-up)."""
        for tool in self._tools:
            if isinstance(tool.target, WakeUpsTarget):
                return tool.target
        return None

    @property
    def pending(self) -> list[WakeUp]:
        return self.state.pending

    # --- setting and cancelling -----------------------------------------------------------

    def check(self, request: WakeUpRequest, now: datetime) -> WakeUp | Refusal:
        """The wake-up ``request`` stands for, checked against the owner's bounds (not
        kept yet: ``add`` keeps it); why not, when it is refused."""
        limits = self.limits
        if limits is None:
            return Refusal(NOT_ENABLED)
        if len(self.pending) >= limits.max_per_session:
            return Refusal(
                f"refused: this session already holds {len(self.pending)} wake-ups, the most "
                f"its worker allows (max_per_session {limits.max_per_session}); cancel one first"
            )
        number = self.state.made + 1
        return planned(
            request, f"w{number}", epoch(now), limits.min_interval_seconds, limits.max_ahead_days
        )

    def starter_set(self, request: WakeUpRequest, now: datetime) -> Refusal | None:
        """A starter's wake-up, kept; why not, when it is refused."""
        checked = self.check(request, now)
        if isinstance(checked, Refusal):
            return checked
        self.add(checked)
        return None

    def add(self, wake_up: WakeUp) -> WakeUp:
        self.changed = True
        self.state.made += 1
        self.state.pending.append(wake_up)
        return wake_up

    def cancel_problem(self, wake_up_id: str) -> Refusal | None:
        """Why ``cancel`` would change nothing: no wake-up of that id is set."""
        if any(w.id == wake_up_id for w in self.pending):
            return None
        held = ", ".join(w.id for w in self.pending) or "none"
        return Refusal(f"no wake-up {wake_up_id!r} is set (set now: {held})")

    def cancel(self, wake_up_id: str) -> Refusal | None:
        """Cancel one by id: it never fires again. Why not, when there is none."""
        problem = self.cancel_problem(wake_up_id)
        if problem is None:
            self.state.pending = [w for w in self.pending if w.id != wake_up_id]
            self.changed = True
        return problem

    # --- the tools, carried out in the session ------------------------------------------

    def tool_results(
        self,
        calls: Sequence[ToolCall],
        slots: Sequence[int],
        tools: dict[str, ResolvedTool],
        now: datetime,
    ) -> dict[int, ToolMessage]:
        """The results of the batch's approved wake-up calls, done in request order."""
        results: dict[int, ToolMessage] = {}
        for k in slots:
            call = calls[k]
            target = tools[call.function.name].target
            assert isinstance(target, WakeUpsTarget)
            arguments = arguments_of(call.function.arguments)
            if not isinstance(arguments, dict):
                results[k] = error_result(call, "the arguments are not a JSON object")
                continue
            text, failed = self._tool(target.action, arguments, now, target.timezone)
            error = True if failed else None
            results[k] = ToolMessage(
                tool_call_id=call.id, content=text, tool_name=call.function.name, is_error=error
            )
        return results

    def _tool(
        self,
        action: Literal["set", "list", "cancel"],
        arguments: dict[str, Any],
        now: datetime,
        default_zone: str,
    ) -> tuple[str, bool]:
        if action == "list":
            if not self.pending:
                return "No wake-ups are set.", False
            return "\n".join(describe(w) for w in self.pending), False
        if action == "cancel":
            wake_up_id = arguments.get("id")
            refusal = self.cancel(str(wake_up_id))
            return (refusal, True) if refusal else (f"Cancelled wake-up {wake_up_id}.", False)
        try:
            request = request_from_tool(arguments, default_zone)
        except ValueError as error:
            return f"refused: {error}", True
        checked = self.check(request, now)
        if isinstance(checked, Refusal):
            return checked, True
        made = self.add(checked.model_copy(update={"set_by": "model"}))
        return f"Set wake-up {describe(made)}", False

    # --- waiting and firing ------------------------------------------------------------------

    def wait(self, now: datetime) -> timedelta | None:
        """How long until the earliest due time (``None``: none is set)."""
        self.changed = False
        if not self.pending:
            return None
        earliest = min(w.due for w in self.pending)
        return timedelta(milliseconds=max(earliest - epoch(now), 1))

    def take_due(self, now: datetime) -> list[UserMessage]:
        """Every wake-up due at ``now`` as its message, in due order; a one-time one is
        gone, a repeating one moves to its next due time after ``now``."""
        self.state.pending, due = fired(self.pending, epoch(now))
        return [wake_up_message(w, epoch(now)) for w in due]
