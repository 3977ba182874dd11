"""``durable-agent serve``: the HTTP gateway, its console, and the codec endpoint
the Temporal UI decodes through."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any, TextIO

from durable_agent._client.sessions import AgentClient
from durable_agent._observability.logs import configure_logging
from durable_agent._payloads.encryption import EncryptionCodec
from durable_agent._providers import model_from_environment
from durable_agent.temporal._plugin import load_agents

from .args import CommandError, add_agent_arguments, codec_keys, load_spec, server_settings


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--spec", help="agent spec JSON file new sessions run")
    add_agent_arguments(serve, by_name=False)
    serve.add_argument("--instructions", help="system prompt for the default spec")
    serve.add_argument("--tool", action="append", default=[], help="tool for the default spec")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8700)
    serve.add_argument(
        "--trusted-host",
        action="append",
        default=[],
        help="a host name the gateway is reached by (besides --host); others are refused",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        help="a browser origin (besides the gateway's own) whose pages may call the API",
    )
    serve.add_argument(
        "--codec-origin",
        action="append",
        default=[],
        help="a browser origin that may decode through /codec (the Temporal UI's, e.g. "
        "http://localhost:8233); with codec keys set. The endpoint takes the gateway's own "
        "users: each payload is decoded for its session's owner or an admin",
    )
    serve.add_argument(
        "--memory-store",
        help="the workers' memory store (sqlite:///path or postgresql://...): its memories "
        "are served at /api/memory and in the console, each user seeing their own tenant's",
    )


async def cmd_gateway(args: argparse.Namespace, out: TextIO) -> int:
    try:
        import uvicorn  # noqa: F401  (the extra is there)

        from durable_agent.gateway import create_app
    except ImportError as error:
        raise CommandError(
            f"the gateway needs its extra: pip install 'durable-agent[gateway]' ({error})"
        ) from None
    access = gateway_access(args.host, args.trusted_host, args.allow_origin, args.codec_origin)
    spec = load_spec(args) if args.spec or model_from_environment() else None
    named = {n: a.spec() for n, a in load_agents([m for m in args.agents.split(",") if m]).items()}
    keys = codec_keys(args)
    codec = EncryptionCodec(keys) if keys is not None else None  # the Temporal UI's
    if keys is not None:  # /codec decodes users' words: no log line may show them
        configure_logging("info", once=True, withhold=True)
    if not access.authenticated:
        print(
            "no authentication (DURABLE_AGENT_GATEWAY_TOKENS unset): loopback only",
            file=out,
            flush=True,
        )
    agents = await AgentClient.connect(server_settings(args), task_queue=args.task_queue)
    memory = None
    if args.memory_store:
        from durable_agent.capabilities import Memory

        memory = Memory(args.memory_store, {}, keys=keys)
    app = create_app(agents, spec, named, codec, access, memory)
    ready = f"durable-agent gateway on http://{args.host}:{args.port}/"
    await serve_http(app, args, out, ready, own_logging=keys is not None)
    return 0


def add_mcp_serve_command(command: Any) -> None:
    sub = command("mcp-serve", "the agents as MCP tools (stdio, or streamable HTTP at /mcp)")
    add_agent_arguments(sub, by_name=False)
    sub.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    sub.add_argument("--host", default="127.0.0.1", help="http: the address to bind")
    sub.add_argument("--port", type=int, default=8701, help="http: the port")
    sub.add_argument(
        "--trusted-host",
        action="append",
        default=[],
        help="http: a host name the server is reached by (besides --host)",
    )


async def cmd_mcp_serve(args: argparse.Namespace, out: TextIO) -> int:
    """Each of ``--agents``' agents an MCP tool; every call a durable session."""
    try:
        import uvicorn  # noqa: F401  (the extra is there)

        from durable_agent.gateway._mcp_server import mcp_http_app, mcp_server
    except ImportError as error:
        raise CommandError(
            f"mcp-serve needs the gateway and mcp extras: pip install "
            f"'durable-agent[gateway,mcp]' ({error})"
        ) from None
    named = load_agents([m for m in args.agents.split(",") if m])
    if not named:
        raise CommandError("mcp-serve: name the agents it offers (--agents MODULE)")
    keys = codec_keys(args)
    if keys is not None:  # a task and its answer are users' words: no log line may show them
        configure_logging("info", once=True, withhold=True)
    agents = await AgentClient.connect(server_settings(args), task_queue=args.task_queue)
    server = mcp_server(agents, named)
    if args.transport == "stdio":  # stdout is the protocol's: nothing else is written there
        await server.run_stdio_async()
        return 0
    app = mcp_http_app(server, gateway_access(args.host, args.trusted_host))
    ready = f"durable-agent MCP server on http://{args.host}:{args.port}/mcp"
    await serve_http(app, args, out, ready, own_logging=keys is not None)
    return 0


def gateway_access(
    host: str, trusted: list[str], origins: list[str] | None = None, codec: list[str] | None = None
) -> Any:
    """Who may call an HTTP entry point, from the environment (``GatewayAccess``)."""
    from durable_agent.gateway import AccessError, GatewayAccess

    try:
        return GatewayAccess.from_environment(host, trusted, origins or [], codec or [])
    except AccessError as error:
        raise CommandError(str(error)) from None


#: How long a stopped gateway lets its open requests finish (an event stream never
#: does: its readers are cut and resume from their last offset elsewhere).
GRACEFUL_STOP_SECONDS = 3


async def serve_http(
    app: Any, args: argparse.Namespace, out: TextIO, ready: str, *, own_logging: bool = False
) -> None:
    """``app`` on ``--host``/``--port`` until stopped, saying ``ready`` first.

    A stop (SIGTERM, SIGINT) cancels this task (``shutdown.stoppable``) while uvicorn,
    which hears the same signal, begins its own shutdown. Cancelled in the middle, the
    app's lifespan would be torn down with a traceback; so the app's event streams are
    ended (``app.state.stopping``, when it has one), the server is told to exit and is
    waited for (``GRACEFUL_STOP_SECONDS`` at most for requests still open), and only
    then does the stop go on. ``own_logging``: the process has set up its log
    (``configure_logging``), and uvicorn's lines go through it rather than uvicorn's own
    handlers, which print a failed request's traceback whole."""
    import uvicorn
    from sse_starlette.sse import AppStatus

    # sse-starlette cancels every event stream, its closing message unsent, once uvicorn
    # is told to exit: a race with the orderly end below, which uvicorn then reports as a
    # response left incomplete. The streams are ended here first; the rest are its own.
    AppStatus.enable_automatic_graceful_drain = False
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        log_config=None if own_logging else uvicorn.config.LOGGING_CONFIG,
        timeout_graceful_shutdown=GRACEFUL_STOP_SECONDS,
    )
    server = uvicorn.Server(config)
    print(ready, file=out, flush=True)
    serving = asyncio.ensure_future(server.serve())
    try:
        await asyncio.shield(serving)
    except asyncio.CancelledError:
        stopping = getattr(getattr(app, "state", None), "stopping", None)
        if stopping is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(stopping())
        AppStatus.should_exit = True  # any stream still open is ended by sse-starlette
        server.should_exit = True
        while not serving.done():  # the signal uvicorn raises again when done comes here
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(serving)
        raise
