"""Command-line arguments shared by ``durable-agent`` and ``worker.py``: where the
Temporal server is, how a worker runs, and which spec a command starts (an agent by
name, a spec file, ``--model``, or the model the environment describes). Its own module
so the entry points share it without importing each other."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pydantic import ValidationError
from temporalio.converter import ExternalStorage

from durable_agent._client.results import SpecError, parse_spec
from durable_agent._connection import DEFAULT_ADDRESS, ServerSettings
from durable_agent._contracts.boundary import DEFAULT_TASK_QUEUE
from durable_agent._errors import DurableAgentError
from durable_agent._payloads.encryption import CodecKeyError, CodecKeys
from durable_agent._payloads.storage import (
    DEFAULT_THRESHOLD_BYTES,
    PayloadStorageError,
    payload_storage,
)
from durable_agent._providers import model_from_environment
from durable_agent._spec.document import AgentSpec, ModelSpec
from durable_agent._wire.messages import explain
from durable_agent.temporal._plugin import load_agents


def who_am_i() -> str:
    """Who a command acts as when it is not told: the login name."""
    return os.environ.get("USER") or "cli"


class CommandError(DurableAgentError):
    """An error a person can act on; printed without a traceback."""


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    group = parser.add_argument_group("Temporal server")
    group.add_argument("--address", default=env("TEMPORAL_ADDRESS", DEFAULT_ADDRESS))
    group.add_argument("--namespace", default=env("TEMPORAL_NAMESPACE", "default"))
    group.add_argument("--task-queue", default=env("DURABLE_AGENT_TASK_QUEUE", DEFAULT_TASK_QUEUE))
    group.add_argument("--tls", action="store_true", default=env("TEMPORAL_TLS") == "1")
    group.add_argument("--tls-cert", default=env("TEMPORAL_TLS_CERT"), help="mTLS client cert")
    group.add_argument("--tls-key", default=env("TEMPORAL_TLS_KEY"), help="mTLS client key")
    group.add_argument(
        "--api-key-env",
        default="TEMPORAL_API_KEY",
        help="environment variable holding a Temporal Cloud API key (default: %(default)s)",
    )
    group.add_argument(
        "--codec-keys-env",
        default="DURABLE_AGENT_CODEC_KEYS",
        help="environment variable holding the payload encryption keys, id:base64 "
        "comma-separated, the first encrypting (default: %(default)s; unset: no encryption)",
    )
    group.add_argument(
        "--payload-store",
        default=env("DURABLE_AGENT_PAYLOAD_STORE"),
        help="keep payloads over the threshold out of history, in file:///DIRECTORY, "
        "s3://BUCKET or gs://BUCKET (every client and worker needs the same; "
        "default: $DURABLE_AGENT_PAYLOAD_STORE, unset: none)",
    )
    group.add_argument(
        "--payload-threshold",
        type=int,
        default=int(env("DURABLE_AGENT_PAYLOAD_THRESHOLD", str(DEFAULT_THRESHOLD_BYTES))),
        help="payloads from this many bytes on go to the payload store (default: %(default)s)",
    )


def _seconds(text: str) -> float:
    """A number of seconds, zero or more (argparse says which argument is wrong)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds cannot be negative")
    return seconds


def codec_keys(args: argparse.Namespace) -> CodecKeys | None:
    """The encryption keys the ``--codec-keys-env`` variable holds (``None``: unset)."""
    text = os.environ.get(args.codec_keys_env) if args.codec_keys_env else None
    try:
        return CodecKeys.parse(text) if text else None
    except CodecKeyError as error:
        raise CommandError(f"{args.codec_keys_env}: {error}") from None


def payload_store(args: argparse.Namespace) -> ExternalStorage | None:
    """The storage ``--payload-store`` names (``None``: unset)."""
    url = getattr(args, "payload_store", None)
    try:
        return payload_storage(url, threshold_bytes=args.payload_threshold) if url else None
    except (PayloadStorageError, ImportError) as error:
        raise CommandError(f"--payload-store: {error}") from None


def server_settings(args: argparse.Namespace) -> ServerSettings:
    return ServerSettings(
        codec_keys=codec_keys(args),
        payload_storage=payload_store(args),
        address=args.address,
        namespace=args.namespace,
        api_key=(os.environ.get(args.api_key_env) or None) if args.api_key_env else None,
        tls=args.tls,
        tls_cert=Path(args.tls_cert) if args.tls_cert else None,
        tls_key=Path(args.tls_key) if args.tls_key else None,
    )


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        choices=["test", "demo"],
        help="answer every model call with a model served by this process, for development: "
        "'test' calls each tool once and answers with a value of the agent's output type; "
        "'demo' is the demo's weather model",
    )


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--tools",
        default=env("DURABLE_AGENT_TOOLS", ""),
        help="comma-separated modules whose @tool functions to load (or DURABLE_AGENT_TOOLS)",
    )
    parser.add_argument(
        "--agents",
        default=env("DURABLE_AGENT_AGENTS", ""),
        help="comma-separated modules whose Agents to load: their tools, endpoints and MCP "
        "servers are registered (or DURABLE_AGENT_AGENTS)",
    )
    parser.add_argument(
        "--capabilities",
        default=env("DURABLE_AGENT_CAPABILITIES"),
        help="TOML or JSON file of what sessions may use: model endpoints, MCP servers, "
        "OpenAPI services, secrets, task queues (or DURABLE_AGENT_CAPABILITIES)",
    )
    parser.add_argument(
        "--trust-specs",
        action="store_true",
        default=env("DURABLE_AGENT_TRUST_SPECS") == "1",
        help="local development only: let session specs carry endpoints, commands, URLs, "
        "files and variable names, as if whoever starts a session owned this machine",
    )
    parser.add_argument("--data-dir", default=env("DURABLE_AGENT_DATA", ".data"))
    parser.add_argument(
        "--transcript-store",
        default=env("DURABLE_AGENT_TRANSCRIPT_STORE"),
        help="sqlite:///path, postgresql://... or memory: (default: SQLite in --data-dir)",
    )
    parser.add_argument(
        "--message-log",
        default=env("DURABLE_AGENT_MESSAGE_LOG"),
        help="write every message of the sessions served, once each, as JSON lines under "
        "this directory (or DURABLE_AGENT_MESSAGE_LOG)",
    )
    parser.add_argument(
        "--build-id",
        type=_version_part,
        default=env("DURABLE_AGENT_BUILD_ID"),
        help="run as this build of a versioned deployment: sessions stay on the build that "
        "started them and move at a turn boundary (or DURABLE_AGENT_BUILD_ID)",
    )
    parser.add_argument(
        "--deployment",
        type=_version_part,
        default=env("DURABLE_AGENT_DEPLOYMENT", "durable-agent"),
        help="the worker deployment's name, with --build-id (or DURABLE_AGENT_DEPLOYMENT)",
    )
    parser.add_argument(
        "--sandboxed",
        action="store_true",
        default=env("DURABLE_AGENT_SANDBOXED") == "1",
        help="run the sessions' workflows inside temporalio's sandbox too (more CPU; CI "
        "replays them there anyway) (or DURABLE_AGENT_SANDBOXED=1)",
    )
    parser.add_argument(
        "--drain-seconds",
        type=_seconds,
        default=_seconds(env("DURABLE_AGENT_DRAIN_SECONDS", "120")),
        help="on SIGTERM, stop taking work and let calls in flight finish for up to this "
        "long before handing them over (default 120; or DURABLE_AGENT_DRAIN_SECONDS)",
    )
    parser.add_argument("--log-level", default=env("DURABLE_AGENT_LOG_LEVEL", "info"))
    parser.add_argument(
        "--log-json", action="store_true", default=env("DURABLE_AGENT_LOG_JSON") == "1"
    )
    parser.add_argument(
        "--otlp-endpoint",
        default=env("OTEL_EXPORTER_OTLP_ENDPOINT"),
        help="export spans over OTLP/HTTP there, e.g. http://127.0.0.1:4318 "
        "(or OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    parser.add_argument(
        "--metrics-address",
        default=env("DURABLE_AGENT_METRICS_ADDRESS"),
        help="serve Prometheus metrics on host:port, e.g. 0.0.0.0:9464 "
        "(or DURABLE_AGENT_METRICS_ADDRESS)",
    )
    parser.add_argument("--port", type=int, default=7233, help="dev server port")
    parser.add_argument("--ui-port", type=int, default=8233, help="dev server UI port")


# --- the live view ------------------------------------------------------------------------


def _version_part(text: str) -> str:
    """A deployment name or build id: some text, without the ``:`` that joins them."""
    if not text.strip() or ":" in text:
        raise argparse.ArgumentTypeError(f"{text!r}: not empty, and without ':'")
    return text


# Which spec a command starts: an agent by name, a spec file, a model named with
# ``--model``, or the model the environment describes.

def add_agent_arguments(parser: argparse.ArgumentParser, by_name: bool = True) -> None:
    parser.add_argument(
        "--agents",
        default=os.environ.get("DURABLE_AGENT_AGENTS", ""),
        help="comma-separated modules whose Agents may be started by name",
    )
    if by_name:
        parser.add_argument("--agent", help="run this agent of --agents' modules, by name")


def load_spec(args: argparse.Namespace) -> AgentSpec:
    if getattr(args, "agent", None):
        named = load_agents([m for m in args.agents.split(",") if m])
        if args.agent not in named:
            listed = ", ".join(sorted(named)) or "none: load them with --agents MODULE"
            raise CommandError(f"no agent {args.agent!r} (agents: {listed})")
        return named[args.agent].spec()
    if args.spec:
        path = Path(args.spec)
        try:
            text = path.read_text()
        except OSError as error:
            raise CommandError(f"cannot read spec {path}: {error.strerror}") from None
        try:
            return parse_spec(text)
        except SpecError as error:
            raise CommandError(f"{path}: {error}") from None
    model: ModelSpec | None = None
    if getattr(args, "model", None):
        try:
            model = ModelSpec.model_validate(args.model)
        except ValidationError as error:
            raise CommandError(f"--model: {explain(error)}") from None
    else:
        model = model_from_environment()
    if model is None:
        raise CommandError(
            "no model: name one with --model ENDPOINT:MODEL (as openai:gpt-4o-mini; any name "
            "does on a worker started with --model test), run an agent of yours with "
            "--agents MODULE --agent NAME, pass --spec FILE, or set OPENAI_API_KEY (or "
            "OPENAI_BASE_URL). `durable-agent demo` needs none of these."
        )
    return AgentSpec(
        model=model,
        instructions=args.instructions,
        tools=[{"name": name} for name in args.tool],
    )
