"""What a model call's lost attempts were billed for.

A worker that dies after the provider answered, but before its activity reported, has
cost tokens no result carries: Temporal retries the call elsewhere and the provider
bills again. Each attempt notes its reply's usage in the workers' store first; a later
attempt of the same call adds what earlier ones noted to its reply
(``voided_usage``), so budgets and the per-model spend count every billed attempt. A
store that keeps nothing across workers (``memory:``) cannot tell, and says nothing.
"""

from __future__ import annotations

import structlog
from temporalio import activity

from durable_agent._wire._messages import AssistantMessage, Usage

from .transcript_store import TranscriptStore

log = structlog.get_logger("durable_agent.billing")


async def with_voided_usage(store: TranscriptStore, reply: AssistantMessage) -> AssistantMessage:
    """``reply`` with the usage its call's earlier, lost attempts noted; this attempt's
    own usage noted for a later one."""
    info = activity.info()
    call = f"billed:{info.workflow_run_id}:{info.activity_id}"
    try:
        if reply.usage is not None:
            await store.put_note(f"{call}:{info.attempt}", reply.usage.model_dump_json())
        voided = [await store.load_note(f"{call}:{k}") for k in range(1, info.attempt)]
    except Exception as error:  # billing is told, never the reason a call fails
        log.warning("billing notes unavailable", error=str(error))
        return reply
    found = [Usage.model_validate_json(note) for note in voided if note is not None]
    if not found:
        return reply
    total = sum(found[1:], found[0])
    return reply.model_copy(update={"voided_usage": total})
