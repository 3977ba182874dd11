"""An update a workflow refused raises an error that says why.

temporalio raises ``WorkflowUpdateFailedError("Workflow update failed")`` and keeps the
workflow's reason in ``.cause``; a person reading a traceback sees no reason at all. A
client with this interceptor (``connect_client``'s, and any client given
``DurableAgentPlugin``) raises ``UpdateRefusedError`` instead: the same class to catch
(a subclass), its message the reason the workflow gave.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import (
    Interceptor,
    OutboundInterceptor,
    StartWorkflowUpdateInput,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
)
from temporalio.exceptions import ApplicationError

from durable_agent._errors import DurableAgentError


class UpdateRefusedError(WorkflowUpdateFailedError, DurableAgentError):
    """An update the workflow refused (or failed): the message is its reason."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(cause)
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause)
        self.reason = reason or type(cause).__name__
        self.args = (f"the workflow refused the update: {self.reason}",)

    def __str__(self) -> str:
        return str(self.args[0])


class _SaidHandle(WorkflowUpdateHandle[Any]):
    async def result(self, **kwargs: Any) -> Any:
        try:
            return await super().result(**kwargs)
        except UpdateRefusedError:
            raise
        except WorkflowUpdateFailedError as error:
            raise UpdateRefusedError(error.cause) from error.cause


class _Outbound(OutboundInterceptor):
    async def start_workflow_update(
        self, input: StartWorkflowUpdateInput
    ) -> WorkflowUpdateHandle[Any]:
        handle = await super().start_workflow_update(input)
        handle.__class__ = _SaidHandle  # its ``result`` says why a refusal refused
        return handle


class UpdateRefusals(Interceptor):
    """The client interceptor that makes update refusals say why."""

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Outbound(next)
