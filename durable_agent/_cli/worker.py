"""``durable-agent worker``: a worker process from its command line (its tools,
agents, capabilities, transcript store, telemetry), until SIGINT or SIGTERM; with
``--dev`` the embedded dev server starts first and stops with it."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import structlog
from temporalio.testing import WorkflowEnvironment

from durable_agent._activities import (
    JSONLMessageLog,
    TranscriptStore,
    default_store_url,
    open_transcript_store,
)
from durable_agent._agents import Agent
from durable_agent._connection import connect_client, label, versioned
from durable_agent._observability.logs import configure_logging
from durable_agent._observability.tracing import WorkerMetrics, configure_tracing, flush_spans
from durable_agent._tools.registry import Registry
from durable_agent.capabilities import Capabilities, SpecPolicy, load_capabilities
from durable_agent.temporal import build_worker, start_dev_server
from durable_agent.temporal._local import claimable
from durable_agent.temporal._plugin import (
    calls_in_flight,
    load_agents,
    with_agent_tools,
    with_agents,
)
from durable_agent.temporal._process import exit_without_teardown, freeze_startup_heap
from durable_agent.temporal._worker import load_tool_modules
from durable_agent.testing import FunctionModel, TestModel

from .args import (
    add_model_argument,
    add_server_arguments,
    add_worker_arguments,
    codec_keys,
    payload_store,
    server_settings,
)

log = structlog.get_logger("durable_agent.worker")


async def serve(args: argparse.Namespace) -> None:
    """Run until SIGINT/SIGTERM; with ``--dev`` the dev server stops with the worker."""
    # with codec keys, history and the store hold users' words encrypted: so must the log
    withhold = codec_keys(args) is not None
    configure_logging(args.log_level, json_lines=args.log_json, once=True, withhold=withhold)
    metrics = WorkerMetrics.serve(args.metrics_address) if args.metrics_address else None
    configure_tracing(
        args.otlp_endpoint,
        "durable-agent-worker",
        metrics.runtime.metric_meter if metrics else None,
    )
    runtime = metrics.runtime if metrics else None
    registry = load_tool_modules([m for m in args.tools.split(",") if m])
    agents = load_agents([m for m in args.agents.split(",") if m])
    capabilities = worker_capabilities(args, agents.values())
    model = development_model(args.model)
    if model is not None:  # every model call of the worker goes to it
        capabilities = dataclasses.replace(capabilities, every_model=model.start().endpoint)
        print(f"every model call answered by the {args.model} model", flush=True)
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
            registry=registry,
            transcripts=transcripts,
            capabilities=capabilities,
            message_log=JSONLMessageLog(args.message_log) if args.message_log else None,
            deployment=versioned(args.build_id, args.deployment) if args.build_id else None,
            sandboxed=args.sandboxed,
            agents=list(agents.values()),
            drain_seconds=args.drain_seconds,
        )
        freeze_startup_heap()  # all loaded: later full collections skip it
        async with worker:
            tools = ", ".join(registry_names(registry, agents.values())) or "none"
            named = ", ".join(sorted(agents)) or "none"
            build = f", build {label(args.deployment, args.build_id)}" if args.build_id else ""
            print(
                f"worker ready: task queue {args.task_queue!r}{build}, tools: {tools}, "
                f"agents: {named}",
                flush=True,
            )
            log.info("worker started", task_queue=args.task_queue, tools=tools)
            await stop.wait()
            calls = calls_in_flight(worker)
            log.info(
                "stopping: no new work; calls in flight finish first",
                in_flight=len(calls.running),
                calls=calls.kinds() or "none",
                drain_seconds=args.drain_seconds,
            )
        log.info(
            "stopped",
            finished_while_draining=calls.finished_while_stopping,
            handed_over=calls.handed_over,
        )
    finally:
        if env is not None:
            await env.shutdown()
        if model is not None:
            model.stop()
        flush_spans()
    print("stopped", flush=True)


def development_model(name: str | None) -> FunctionModel | None:
    """``--model``: ``test`` (calls each tool once, then answers with a value of the
    output type) or ``demo`` (the demo's weather model); ``None``: real providers."""
    if name == "test":
        return TestModel()
    if name == "demo":
        from .demo import demo_model_reply

        return FunctionModel(demo_model_reply)
    return None


def registry_names(registry: Registry, agents: Iterable[Agent[Any]]) -> list[str]:
    """The tools the worker has: its modules' and its agents'."""
    return with_agent_tools(registry, agents).names()


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
    add_model_argument(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(serve(parse_args(argv)))
    exit_without_teardown(0)


if __name__ == "__main__":
    main()
