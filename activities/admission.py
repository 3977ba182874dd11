"""The admission activity: a session's spec checked against this worker's registries."""

from __future__ import annotations

import structlog
from temporalio import activity

from durable_agent.activities.heartbeat import heartbeats
from durable_agent.capabilities import Capabilities, admission_problems, registered_prices
from durable_agent.contracts import Admission, AdmissionInput

log = structlog.get_logger("durable_agent.admission")


class AdmissionActivities:
    def __init__(self, capabilities: Capabilities, *, message_log: bool = False) -> None:
        self._capabilities = capabilities
        self._message_log = message_log

    @activity.defn(name="admit_session")
    @heartbeats
    async def admit_session(self, request: AdmissionInput) -> Admission:
        """What the spec may not use here (the session's own task queue is the one
        this activity runs on: a workflow's activities default to its queue)."""
        own_queue = activity.info().task_queue
        refused = await admission_problems(request.spec, self._capabilities, own_queue)
        if refused:
            log.warning("session refused at admission", refused=refused)
        storage = activity.client().data_converter.external_storage
        threshold = storage.payload_size_threshold if storage is not None else None
        prices = registered_prices(request.spec, self._capabilities)
        return Admission(
            refused=refused,
            payload_store_bytes=threshold,
            message_log=self._message_log,
            prices=prices,
            limited=bool(self._capabilities.limits),
        )
