"""The model activity's side of shared provider limits: ask the endpoint's limiter for
capacity before the request leaves, give it back when the reply is in.

A call with capacity goes on at once (it takes its worker's spare lease, or asks the
limiter: one update round trip; ``LimiterLink``). A call without capacity ends its
activity with ``CapacityWait``: the session waits durably for the limiter's
``capacity_ready`` and calls again, and no attempt of the model is used up.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Generic, NamedTuple, TypeVar

import structlog
from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.service import RPCError

from durable_agent._contracts.boundary import ModelCallInput, ModelSetup
from durable_agent._contracts.capacity import LedgerState
from durable_agent._errors import Failure
from durable_agent._spec.endpoints import (
    LIMITER_WORKFLOW,
    CapacityAnswer,
    CapacityRelease,
    CapacityRequest,
    ProviderEndpoint,
    ProviderLimits,
    limiter_id,
)
from durable_agent._wire.codecs import Codec, output_cap_of
from durable_agent._wire.messages import Usage
from durable_agent.capabilities import Capabilities

# A worker process's line to each endpoint's limiter: asks and releases in batches.
#
# The server takes only a few updates at once per workflow (ten in flight by default);
# a burst of concurrent asks beyond that is refused and retried, and slows every ask to
# seconds. So each worker process keeps at most one ask in flight per limiter: asks that
# arrive meanwhile go together in the next one (``acquire``, a list in, a list out).
# Releases go the same way, by signal. Under light load nothing waits for a batch: a
# lone ask leaves at once.
#
# A call under the limit should not wait for a round trip either, so each process keeps
# one **spare lease** per limiter: asked for behind each call that got one, granted only
# while nobody waits in line and there is capacity, and taken by the next call at once. A
# spare is good for half the limit's ``margin_seconds`` (the margin covers the time it
# was counted before its request left); one not taken by then goes back unused.

log = structlog.get_logger("durable_agent.capacity")

#: Sends of one batch when the server aborts them (first asks racing to start the
#: limiter, or its continue-as-new); then the asking activities fail and are retried.
SEND_TRIES = 5

In = TypeVar("In")
Out = TypeVar("Out")


class _Batcher(Generic[In, Out]):
    """One send in flight per key; what arrives meanwhile goes in the next send."""

    def __init__(self, send: Callable[[str, list[In]], Awaitable[list[Out]]]) -> None:
        self._send = send
        self._queued: dict[str, list[tuple[In, asyncio.Future[Out]]]] = {}
        self._running: dict[str, asyncio.Task[None]] = {}

    def put(self, key: str, item: In) -> asyncio.Future[Out]:
        future: asyncio.Future[Out] = asyncio.get_running_loop().create_future()
        self._queued.setdefault(key, []).append((item, future))
        if key not in self._running:
            task = asyncio.get_running_loop().create_task(self._drain(key))
            self._running[key] = task
        return future

    async def _drain(self, key: str) -> None:
        try:
            while self._queued.get(key):
                batch = self._queued.pop(key)
                try:
                    results = await self._send(key, [item for item, _ in batch])
                except Exception as error:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            del self._running[key]


class LimiterLink:
    def __init__(self, client: Callable[[], Client], task_queue: Callable[[], str]) -> None:
        self._client, self._task_queue = client, task_queue
        self._limits: dict[str, ProviderLimits] = {}
        self._asks: _Batcher[CapacityRequest, CapacityAnswer] = _Batcher(self._send_asks)
        self._releases: _Batcher[CapacityRelease, None] = _Batcher(self._send_releases)
        self._connection: tuple[Client, str] | None = None
        self._spares: dict[str, str] = {}
        self._refilling: set[str] = set()
        self._slowdowns: dict[str, int] = {}
        """429s seen per limiter: a spare asked for before the latest goes back unused."""

    async def ask(
        self, key: str, request: CapacityRequest, *, spare: bool = True
    ) -> CapacityAnswer:
        """The limiter's answer (this process's spare lease, when ``spare`` and it has
        one); a lease granted to an ask whose activity was cancelled meanwhile goes back
        at once."""
        self._remember()
        self._limits[key] = request.limits
        kept = self._spares.pop(key, None) if spare else None
        if kept is not None:
            self._refill(key, request)
            return CapacityAnswer(lease=kept)
        future = self._asks.put(key, request)
        try:
            answer = await asyncio.shield(future)
        except asyncio.CancelledError:
            future.add_done_callback(lambda f: self._give_back_unused(key, f))
            raise
        if answer.lease is not None:
            self._refill(key, request)
        return answer

    def _refill(self, key: str, like: CapacityRequest) -> None:
        """Ask for a spare lease, in the background, for a call like ``like``."""
        good_for = like.limits.margin_seconds / 2
        if key in self._refilling or good_for <= 0:
            return
        self._refilling.add(key)
        slowdowns = self._slowdowns.get(key, 0)
        spare = like.model_copy(
            update={"session_id": "spare", "run_id": "", "tenant": "", "spare": True}
        )

        def keep(future: asyncio.Future[CapacityAnswer]) -> None:
            self._refilling.discard(key)
            lease = None if future.cancelled() or future.exception() else future.result().lease
            if lease is None:
                return
            if key in self._spares or self._slowdowns.get(key, 0) != slowdowns:
                self._queue_release(key, CapacityRelease(lease=lease, unused=True))
                return
            self._spares[key] = lease
            asyncio.get_running_loop().call_later(good_for, self._expire, key, lease)

        self._asks.put(key, spare).add_done_callback(keep)

    def _expire(self, key: str, lease: str) -> None:
        if self._spares.get(key) == lease:
            del self._spares[key]
            self._queue_release(key, CapacityRelease(lease=lease, unused=True))

    def release(self, key: str, release: CapacityRelease) -> None:
        """Sent behind the reply (nobody waits for it); a release that is lost ends with
        its lease's hold."""
        self._remember()
        self._queue_release(key, release)
        if release.rate_limited:  # the endpoint slows down: this process's spare too
            self._slowdowns[key] = self._slowdowns.get(key, 0) + 1
            spare = self._spares.pop(key, None)
            if spare is not None:
                self._queue_release(key, CapacityRelease(lease=spare, unused=True))

    def _queue_release(self, key: str, release: CapacityRelease) -> None:
        self._releases.put(key, release).add_done_callback(_quietly)

    def _remember(self) -> None:
        """The client and queue, read in the activity's context (the sends run after)."""
        self._connection = (self._client(), self._task_queue())

    def _give_back_unused(self, key: str, future: asyncio.Future[CapacityAnswer]) -> None:
        if not future.cancelled() and future.exception() is None and future.result().lease:
            self._queue_release(key, CapacityRelease(lease=future.result().lease or ""))

    async def _send_asks(self, key: str, requests: list[CapacityRequest]) -> list[CapacityAnswer]:
        assert self._connection is not None
        client, queue = self._connection
        for attempt in itertools.count():
            start: WithStartWorkflowOperation[Any, None] = WithStartWorkflowOperation(
                LIMITER_WORKFLOW,
                args=[key, LedgerState(limits=self._limits[key], lease_prefix=_prefix())],
                id=limiter_id(key, self._limits[key]),
                task_queue=queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                result_type=type(None),
            )  # (one use each)
            try:
                answers: list[CapacityAnswer] = await client.execute_update_with_start_workflow(
                    "acquire",
                    requests,
                    start_workflow_operation=start,
                    result_type=list[CapacityAnswer],
                )
                return answers
            except RPCError:
                with contextlib.suppress(Exception):
                    await start.workflow_handle()  # (its failure, read so it is not logged)
                if attempt + 1 >= SEND_TRIES:
                    raise
                await asyncio.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    async def _send_releases(self, key: str, releases: list[CapacityRelease]) -> list[None]:
        assert self._connection is not None
        client, _ = self._connection
        limiter = limiter_id(key, self._limits[key])
        await client.get_workflow_handle(limiter).signal("release", releases)
        return [None] * len(releases)


def _prefix() -> str:
    """A limiter's lease prefix: random, so nobody names a lease by guessing."""
    return secrets.token_hex(8)


def _quietly(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("capacity not given back", error=str(future.exception()))



#: The output a request without a cap is counted for, until its usage says otherwise.
DEFAULT_OUTPUT_TOKENS = 1_024


def estimated_tokens(body: dict[str, Any], codec: Codec) -> int:
    """A request's cost before it is sent: its text at four characters a token, plus
    its output cap (in the key the codec names for it)."""
    key = output_cap_of(codec)
    cap = body.get(key) if key is not None else None
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return len(text) // 4 + (cap if isinstance(cap, int) else DEFAULT_OUTPUT_TOKENS)


class LimitedCall(NamedTuple):
    """What a call asks its endpoint's limit for capacity as: the endpoint as the spec names
    it (a registered name is its own limit, whatever its URL), and the call."""

    endpoint: ProviderEndpoint | str
    call: ModelCallInput


class Lease:
    """Capacity held for one request: given back once, with what the reply cost."""

    def __init__(self, gate: CapacityGate, key: str, lease: str) -> None:
        self._gate, self.key, self.lease = gate, key, lease

    def give_back(
        self,
        usage: Usage | None = None,
        *,
        rate_limited: bool = False,
        retry_after: float | None = None,
    ) -> None:
        tokens = usage.prompt_tokens + usage.completion_tokens if usage is not None else None
        release = CapacityRelease(
            lease=self.lease, tokens=tokens, rate_limited=rate_limited, retry_after=retry_after
        )
        self._gate.release(self.key, release)


class CapacityGate:
    def __init__(self, capabilities: Capabilities) -> None:
        self._capabilities = capabilities
        self._link = LimiterLink(activity.client, lambda: activity.info().task_queue)

    async def acquire(
        self,
        limited: LimitedCall,
        setup: ModelSetup,
        codec: Codec,
        body: dict[str, Any],
        hold_seconds: float,
    ) -> Lease | None:
        """Capacity for this request (``None``: the endpoint is not limited), or
        ``CapacityWait`` raised for the workflow to wait on."""
        # the model the request names, as the provider reads it: its limit, no other
        named = body.get("model")
        model = named if isinstance(named, str) else setup.model
        found = self._capabilities.limits_for(limited.endpoint, model)
        if found is None:
            return None
        key, limits = found
        info, tenant = activity.info(), limited.call.tenant
        request = CapacityRequest(
            limits=limits,
            session_id=info.workflow_id or "",
            run_id=info.workflow_run_id or "",
            tenant=tenant or "",
            tokens=estimated_tokens(body, codec),
            hold_seconds=hold_seconds,
        )
        # a call woken for capacity kept for it claims that capacity, never a spare
        answer = await self._link.ask(key, request, spare=not limited.call.waited)
        if answer.lease is None:
            log.info("waiting for capacity", endpoint=key, tenant=tenant)
            raise ApplicationError(
                f"no capacity on {key} now; the call waits in line",
                key,
                answer.wait_seconds,
                type=Failure.CAPACITY_WAIT,
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,  # expected: logged as debug
            )
        return Lease(self, key, answer.lease)

    def release(self, key: str, release: CapacityRelease) -> None:
        self._link.release(key, release)
