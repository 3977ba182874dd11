"""Connecting to a Temporal server (local, self-hosted or Temporal Cloud) with the
pydantic data converter, and errors that say which address was tried."""

from __future__ import annotations

import atexit
import time
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client
from temporalio.converter import ExternalStorage
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from durable_agent._errors import DurableAgentError
from durable_agent._observability._telemetry import client_interceptors
from durable_agent._payloads._encryption import CodecKeys, with_encryption
from durable_agent._payloads._lean import lean_data_converter
from durable_agent._payloads._storage import with_payload_storage

from ._refusals import UpdateRefusals

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
    """Encrypt payloads with these keys (``durable_agent._payloads._encryption``)."""
    payload_storage: ExternalStorage | None = None
    """Keep payloads over its threshold out of history (``durable_agent._payloads._storage``)."""


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
