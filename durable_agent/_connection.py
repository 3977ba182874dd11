"""Reaching a Temporal server and naming worker versions: what the client and the
worker both need, below both, so that a client process loads no worker.

Three parts, in this order: worker versions (a deployment name and a build id, and how a
session moves to a new build), updates a workflow refused raised with the workflow's
reason (``UpdateRefusedError``), and connecting (``connect_client``, ``ServerSettings``)
with errors that say which address was tried."""

from __future__ import annotations

import atexit
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowUpdateInput,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
)
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.converter import ExternalStorage
from temporalio.exceptions import ApplicationError
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig
from temporalio.worker import WorkerDeploymentConfig

from durable_agent._errors import DurableAgentError
from durable_agent._observability.tracing import client_interceptors
from durable_agent._payloads.encryption import CodecKeys, with_encryption
from durable_agent._payloads.storage import lean_data_converter, with_payload_storage

# Versioned workers: each build of the worker is a version of a Temporal worker
# deployment (a deployment name and a build id).
#
# Sessions are pinned: a run stays on the build that started it and never replays on
# another. When the workers' owner makes a new build current, a session goes to it by
# continue-as-new at a turn boundary, on its own (``session.upgrade = "auto"``) or when a
# person moves it (``"pinned"``). The shared-limit workflow upgrades on its own.

#: The deployment name when only a build id is given.
DEFAULT_DEPLOYMENT = "durable-agent"
#: The visibility field the server keeps each run's version in (``DEPLOYMENT:BUILD_ID``).
VERSION_FIELD = "TemporalWorkerDeploymentVersion"
DEPLOYMENT_FIELD = "TemporalWorkerDeployment"


def versioned(build_id: str, deployment: str = DEFAULT_DEPLOYMENT) -> WorkerDeploymentConfig:
    """A worker's versioning: this build of ``deployment``; workflows without their own
    behaviour are pinned (a user's, beside the sessions)."""
    if not build_id.strip() or not deployment.strip():
        raise ValueError("a versioned worker needs a deployment name and a build id")
    if ":" in deployment or ":" in build_id:
        raise ValueError(f"deployment {deployment!r} and build id {build_id!r} may not hold ':'")
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=deployment, build_id=build_id),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


def label(deployment: str, build_id: str) -> str:
    """How a version is written: ``DEPLOYMENT:BUILD_ID`` (as the server lists it)."""
    return f"{deployment}:{build_id}"


def split_label(version: str, deployment: str = DEFAULT_DEPLOYMENT) -> tuple[str, str]:
    """``DEPLOYMENT:BUILD_ID`` (or a bare build id of ``deployment``) as its two parts."""
    name, _, build = version.rpartition(":")
    if not build:
        raise ValueError(f"not a version: {version!r} (DEPLOYMENT:BUILD_ID or BUILD_ID)")
    return name or deployment, build


# An update a workflow refused raises an error that says why.
#
# temporalio raises ``WorkflowUpdateFailedError("Workflow update failed")`` and keeps the
# workflow's reason in ``.cause``; a person reading a traceback sees no reason at all. A
# client with this interceptor (``connect_client``'s, and any client given
# ``DurableAgentPlugin``) raises ``UpdateRefusedError`` instead: the same class to catch
# (a subclass), its message the reason the workflow gave.

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


# Connecting to a Temporal server (local, self-hosted or Temporal Cloud) with the
# pydantic data converter, and errors that say which address was tried.

DEFAULT_ADDRESS = "127.0.0.1:7233"


class ServerUnreachableError(DurableAgentError, ConnectionError):
    """No Temporal server answered at the address."""

    def __init__(self, address: str, detail: str) -> None:
        super().__init__(
            f"cannot reach Temporal at {address}: {detail}\n"
            "Start one with `durable-agent dev`, or pass --address / set TEMPORAL_ADDRESS."
        )
        self.address = address


@dataclass(frozen=True)
class ServerSettings:
    address: str = DEFAULT_ADDRESS
    namespace: str = "default"
    api_key: str | None = None
    """A Temporal Cloud API key (implies TLS)."""
    tls: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None
    """mTLS client certificate and key (Temporal Cloud's other way in)."""
    codec_keys: CodecKeys | None = None
    """Encrypt payloads with these keys (``durable_agent._payloads.encryption``)."""
    payload_storage: ExternalStorage | None = None
    """Keep payloads over its threshold out of history (``durable_agent._payloads.storage``)."""


#: How long the interpreter, about to finalize, lets go of the GIL (see ``_hand_over``).
EXIT_HANDOVER_SECONDS = 0.05

_handover_registered = False


def _hand_over() -> None:
    # temporalio's Rust threads hand each RPC's result to Python while holding the GIL,
    # and let go of it only after the awaiting code has already resumed. If the program
    # ends in that moment, the interpreter finalizes while such a thread still waits for
    # the GIL, and CPython aborts the process ("Fatal Python error: PyGILState_Release",
    # exit 134; temporalio/sdk-python#300). Sleeping releases the GIL, so a waiting
    # thread finishes before finalization starts (atexit runs before it).
    time.sleep(EXIT_HANDOVER_SECONDS)


def hand_over_at_exit() -> None:
    """Let temporalio's threads finish with Python before the interpreter finalizes
    (once a process, for every program that talks to Temporal)."""
    global _handover_registered
    if not _handover_registered:
        _handover_registered = True
        atexit.register(_hand_over)


async def connect_client(settings: ServerSettings, runtime: Runtime | None = None) -> Client:
    hand_over_at_exit()
    tls: bool | TLSConfig = settings.tls or settings.api_key is not None
    if settings.tls_cert and settings.tls_key:
        tls = TLSConfig(
            client_cert=settings.tls_cert.read_bytes(),
            client_private_key=settings.tls_key.read_bytes(),
        )
    try:
        return await Client.connect(
            settings.address,
            namespace=settings.namespace,
            api_key=settings.api_key,
            tls=tls,
            data_converter=with_payload_storage(
                with_encryption(lean_data_converter, settings.codec_keys),
                settings.payload_storage,
            ),
            interceptors=[*client_interceptors(), UpdateRefusals()],
            runtime=runtime,
        )
    except RuntimeError as error:
        raise ServerUnreachableError(settings.address, str(error)) from None
