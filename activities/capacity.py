"""The model activity's side of shared provider limits: ask the endpoint's limiter for
capacity before the request leaves, give it back when the reply is in.

A call with capacity goes on at once (it takes its worker's spare lease, or asks the
limiter: one update round trip; ``limiter_link``). A call without capacity ends its
activity with ``CapacityWait``: the session waits durably for the limiter's
``capacity_ready`` and calls again, and no attempt of the model is used up.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from durable_agent._contracts._contracts import ModelCallInput, ModelSetup
from durable_agent._failures import Failure
from durable_agent._spec._endpoint import ProviderEndpoint
from durable_agent._spec._provider_limits import CapacityRelease, CapacityRequest
from durable_agent._wire._messages import Usage
from durable_agent._wire.codecs import Codec, output_cap_of
from durable_agent.capabilities import Capabilities

from .limiter_link import LimiterLink

log = structlog.get_logger("durable_agent.capacity")

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
