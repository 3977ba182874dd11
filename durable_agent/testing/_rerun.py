"""Rerun a recorded conversation against today's agent code: the same user messages,
sent in turn to a new session of ``spec`` whose model gives the recorded replies
wherever the request is unchanged (``RecordedReplies``), on a worker of its own with
the tools of today's ``registry``. The report says where the new run departs.

A rerun acts on nothing. Every tool call waits at the gate (a first rule asks for a
person, whatever the spec's own rules say), and the rerun answers it from the
recording: the recorded result in the tool's place, or the recorded refusal for a
call a person denied. A call the recording has no answer for is refused. Only with
``run_tools`` do today's tools run, and then never a call a person denied.

This is how an agent change is tested in CI: record sessions once, rerun them on
every change, and fail where they depart (``durable-agent replay``).

The model side of a rerun, ``RecordedReplies``, is below: the recorded replies given
again wherever the request is the one made then.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client

from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.approvals import ApproverKey, ApproverKeys, PendingApproval
from durable_agent._spec.approval_policy import ApprovalRule
from durable_agent._spec.document import HANDOFF_PREFIX, AgentSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import DEFAULT_API, build_request
from durable_agent._wire.messages import AssistantMessage, Message, ToolMessage, UserMessage
from durable_agent._wire.transcript import BranchDiff, diff_branches, message_line
from durable_agent.capabilities import Capabilities
from durable_agent.temporal import build_worker

from ._scripted_provider import ScriptedProvider, error_reply

# A recorded conversation as a model: the replies it holds, given again wherever the
# request is the one that was made then.
#
# ``RecordedReplies`` is a responder for the scripted provider (real Chat Completions
# over HTTP on 127.0.0.1). A request whose messages are the recorded array's up to an
# assistant message is answered with that message, as recorded. Any other request is
# where the new run departs: it is noted, and answered by the ``fallback`` (a live or
# scripted model) or, without one, by an error that ends the turn.
#
# A request made again (the workflow retries a model call whose worker was lost after
# it asked) is the same request: it gets the answer it got before and is not counted
# twice, so a rerun's figures do not depend on how loaded the machine was.

Fallback = Callable[[Any], Any]


def _wire(messages: Sequence[Message]) -> list[Any]:
    """The messages as the rerun's endpoint (of the default wire, Chat Completions)
    carries them, reduced to what they say."""
    body = build_request(DEFAULT_API, messages, model="recorded")
    return [_said(m) for m in body["messages"]]


def _said(message: dict[str, Any]) -> Any:
    calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
        for c in message.get("tool_calls") or []
    ]
    return [message.get("role"), message.get("content"), calls, message.get("tool_call_id")]


@dataclass
class Departure:
    """The first request that was not the recorded one: where it differs first."""

    request: int
    """Which model request of the new run (0: the first)."""
    message: int
    """The first message of the request that is not the recording's (its length when
    the request is the recording's own prefix but ends elsewhere)."""
    recorded: Any
    now: Any


@dataclass
class RecordedReplies:
    recorded: Sequence[Message]
    fallback: Fallback | None = None
    departed_status: int = 400
    """What a departure gets without a fallback: 400 ends the turn; 503 moves the call
    along the model's fallback chain (``rerun(live=True)``: to the live model)."""
    replayed: int = 0
    fresh: int = 0
    repeated: int = 0
    """Requests made again, answered as the first time and not counted above."""
    departures: list[Departure] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _answers: dict[str, Any] = field(default_factory=dict)
    _asking: dict[str, threading.Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._wire = _wire(self.recorded)

    def __call__(self, request: Any) -> Any:
        sent = [_said(m) for m in (request.body or {}).get("messages", [])]
        key = json.dumps(sent, sort_keys=True)
        with self._lock:
            same = self._asking.setdefault(key, threading.Lock())
        with same:  # the same request twice at once: the second waits for the first
            if key in self._answers:
                with self._lock:
                    self.repeated += 1
                return self._answers[key]
            self._answers[key] = self._answer(request, sent)
            return self._answers[key]

    def _answer(self, request: Any, sent: list[Any]) -> Any:
        at = len(sent)
        with self._lock:
            number = self.replayed + self.fresh
            reply = self.recorded[at] if at < len(self.recorded) else None
            if isinstance(reply, AssistantMessage) and sent == self._wire[:at]:
                self.replayed += 1
                return reply
            self.fresh += 1
            first = next(
                (k for k, (a, b) in enumerate(zip(sent, self._wire, strict=False)) if a != b),
                min(at, len(self._wire)),
            )
            self.departures.append(
                Departure(
                    request=number,
                    message=first,
                    recorded=self._wire[first] if first < len(self._wire) else None,
                    now=sent[first] if first < len(sent) else None,
                )
            )
        if self.fallback is not None:
            return self.fallback(request)
        return error_reply(
            self.departed_status, f"the run departs from the recording at message {first}"
        )


#: The endpoint name the rerun's worker registers for the recorded replies.
RECORDED = "recorded"
#: Who decides a rerun's calls (signed with a key only the rerun's own worker knows).
RERUN = "rerun"
#: The rule a rerun puts first: every call waits for the rerun to answer it.
EVERY_CALL_WAITS = ApprovalRule(name="rerun: answered from the recording", action="ask")


@dataclass
class RerunReport:
    session_id: str
    diff: BranchDiff
    """The recorded array (left) against the new one (right), from where they part."""
    replayed: int
    """Model requests answered from the recording."""
    fresh: int
    """Model requests the recording did not hold (the fallback's, or refused)."""
    departures: list[Departure]
    repeated: int = 0
    """Requests made again after a lost worker: answered as before, not counted."""

    @property
    def same(self) -> bool:
        return not self.diff.left and not self.diff.right and not self.departures

    def changed_calls(self) -> list[tuple[int, str, dict[str, Any], dict[str, Any]]]:
        """Tool calls at the same place with other arguments: (index, tool, recorded,
        now)."""
        found = []
        for offset, (old, new) in enumerate(zip(self.diff.left, self.diff.right, strict=False)):
            if isinstance(old, AssistantMessage) and isinstance(new, AssistantMessage):
                for a, b in zip(old.tool_calls or [], new.tool_calls or [], strict=False):
                    was, now = json.loads(a.function.arguments), json.loads(b.function.arguments)
                    if a.function.name == b.function.name and was != now:
                        found.append((self.diff.common + offset, a.function.name, was, now))
        return found

    def summary(self) -> str:
        if self.same:
            return f"same ({self.replayed} replies from the recording)"
        at = self.diff.common
        old = self.diff.left[0] if self.diff.left else None
        new = self.diff.right[0] if self.diff.right else None
        return (
            f"departs at message {at}: recorded {_short(old)}, now {_short(new)} "
            f"({self.replayed} replies from the recording, {self.fresh} not)"
        )


async def rerun(
    client: Client,
    recorded: Sequence[Message],
    spec: AgentSpec,
    *,
    registry: Registry | None = None,
    capabilities: Capabilities | None = None,
    fallback: Fallback | None = None,
    live: bool = False,
    run_tools: bool = False,
    timeout: float = 120,
) -> RerunReport:
    """Send the recording's user messages, in turn, to a new session of ``spec`` (its
    model answered from the recording), answer its tool calls from the recording, and
    compare. Where the run departs, ``fallback`` answers (a scripted model); with
    ``live``, the spec's own model does (its endpoint must be one ``capabilities``
    registers). ``run_tools``: today's tools run instead (never a call a person denied
    in the recording)."""
    if live and fallback is not None:
        raise ValueError("rerun: give a fallback or live, not both")
    replies = RecordedReplies(recorded, fallback, departed_status=503 if live else 400)
    # sent again as new messages: the new session gives them ids of its own
    fresh = {"id": None, "given_id": None}
    users = [m.model_copy(update=fresh) for m in recorded if isinstance(m, UserMessage)]
    if not users:
        raise ValueError("the recording has no user message to send")
    queue = f"rerun-{uuid.uuid4().hex[:10]}"
    with ScriptedProvider(responder=replies) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        owned = capabilities or Capabilities()
        owned = dataclasses.replace(owned, models={**owned.models, RECORDED: endpoint})
        ahead = [spec.model.model_copy(update={"fallbacks": []})] if live else []
        model = spec.model.model_copy(
            update={"endpoint": RECORDED, "fallbacks": ahead, "max_attempts": 1}
        )
        session = spec.session.model_copy(update={"end_after_reply": False})
        rules = [EVERY_CALL_WAITS, *spec.approvals.rules]
        approvals = spec.approvals.model_copy(update={"rules": rules})
        ours = spec.model_copy(update={"model": model, "session": session, "approvals": approvals})
        answers = RecordedAnswers(recorded, run_tools)
        keys = _deciders(spec, registry if registry is not None else Registry(), recorded)
        verifying = ApproverKeys({n: k.private_key.public_key() for n, k in keys.items()})
        async with build_worker(
            client,
            task_queue=queue,
            registry=registry,
            capabilities=owned,
            approver_keys=verifying,
            preload_tokenizers=False,
        ):
            agents = AgentClient(client, task_queue=queue)
            session_id = await agents.start(ours, users[0])
            await _answered(agents, session_id, 0, timeout, answers, keys)
            for user in users[1:]:
                before = await agents.session(session_id).send(user)
                await _answered(agents, session_id, before, timeout, answers, keys)
            now = await agents.session(session_id).messages()
            await agents.session(session_id).end(reason="rerun over")
    return RerunReport(
        session_id,
        diff_branches(recorded, now),
        replies.replayed,
        replies.fresh,
        replies.departures,
        replies.repeated,
    )


class RecordedAnswers:
    """The recording's tool calls and what became of them, taken in order: a call of the
    new run gets the first unused recorded call of the same tool and arguments."""

    def __init__(self, recorded: Sequence[Message], run_tools: bool) -> None:
        self.run_tools = run_tools
        self._unused: list[tuple[tuple[str, Any], ToolMessage]] = []
        for index, message in enumerate(recorded):
            if not isinstance(message, AssistantMessage) or not message.tool_calls:
                continue
            results = recorded[index + 1 : index + 1 + len(message.tool_calls)]
            for call, result in zip(message.tool_calls, results, strict=False):
                if isinstance(result, ToolMessage):  # result k answers call k
                    self._unused.append((_key(call.function.name, call.function.arguments), result))
        self._denied = {key for key, result in self._unused if _denied(result)}

    def take(self, pending: PendingApproval) -> ToolMessage | None:
        key = _key(pending.tool_name, pending.arguments)
        for index, (recorded, result) in enumerate(self._unused):
            if recorded == key:
                del self._unused[index]
                return result
        return None

    def denied_before(self, pending: PendingApproval) -> bool:
        return _key(pending.tool_name, pending.arguments) in self._denied


def _key(tool: str, arguments: str) -> tuple[str, Any]:
    try:
        return tool, json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except ValueError:
        return tool, arguments


def _denied(result: ToolMessage) -> bool:
    return result.approval is not None and result.approval.decision == "denied"


def _deciders(
    spec: AgentSpec, registry: Registry, recorded: Sequence[Message]
) -> dict[str, ApproverKey]:
    """A key for every name that may decide a call of this session, and every name that
    decided one in the recording (the rerun's worker trusts them, and no other worker
    knows them): the rerun signs as one of them."""
    names = {RERUN, *(spec.approvals.approvers or ())}
    names.update(
        m.approval.by
        for m in recorded
        if isinstance(m, ToolMessage) and m.approval and m.approval.by
    )
    names.update(n for t in spec.tools for n in t.approvers or ())
    for name in registry.names():
        found = registry.get(name)
        names.update(found.policy.approvers or () if found is not None else ())
    return {name: ApproverKey.generate(name) for name in sorted(names)}


async def _answered(
    agents: AgentClient,
    session_id: str,
    after: int,
    timeout: float,
    answers: RecordedAnswers,
    keys: dict[str, ApproverKey],
) -> None:
    """Wait for the reply, answering every call the session asks about on the way."""
    answered: set[str] = set()
    while True:
        outcome = await agents.session(session_id).wait(
            after=after, answered=answered, timeout=timeout
        )
        if outcome.kind != "approval":
            return
        for pending in outcome.pending:
            await _answer(agents, session_id, pending, answers, keys)
            answered.add(pending.approval_id)


async def _answer(
    agents: AgentClient,
    session_id: str,
    pending: PendingApproval,
    answers: RecordedAnswers,
    keys: dict[str, ApproverKey],
) -> None:
    """One call: a handoff goes ahead (it only changes who answers, in the session);
    a call a person denied in the recording is denied; otherwise the recorded result,
    or, with ``run_tools``, today's tool; a call the recording never made is refused.
    The rerun decides as the person the recording names, where they may decide."""
    aid = pending.approval_id
    recorded = None if pending.tool_name.startswith(HANDOFF_PREFIX) else answers.take(pending)
    named = recorded.approval.by if recorded is not None and recorded.approval else None
    allowed = pending.approvers
    by = named if named and (allowed is None or named in allowed) else (allowed or [RERUN])[0]
    key = keys.get(by)
    if pending.tool_name.startswith(HANDOFF_PREFIX):
        await agents.session(session_id).approve(aid, by=by, key=key)
        return
    denied = recorded is not None and _denied(recorded)
    if denied or (recorded is None and answers.denied_before(pending)):
        reason = recorded.approval.reason if recorded and recorded.approval else None
        await agents.session(session_id).deny(
            aid, by=by, key=key, reason=reason or "denied in the recording"
        )
    elif answers.run_tools:
        await agents.session(session_id).approve(aid, by=by, key=key)
    elif recorded is not None:
        error = bool(recorded.is_error)
        await agents.session(session_id).respond(
            aid, recorded.content, is_error=error, by=by, key=key
        )
    else:
        await agents.session(session_id).deny(
            aid,
            by=by,
            key=key,
            reason="the recording has no result for this call (a rerun runs no tool; "
            "durable-agent replay --run-tools runs today's tools)",
        )


def _short(message: Message | None) -> str:
    return "nothing" if message is None else message_line(message, 80)
