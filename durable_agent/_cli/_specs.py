"""Which spec a command starts: an agent by name, a spec file, a model named with
``--model``, or the model the environment describes."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pydantic import ValidationError

from durable_agent._agents._modules import load_agents
from durable_agent._client._types import SpecError, parse_spec
from durable_agent._providers._environment import model_from_environment
from durable_agent._spec._spec import AgentSpec, ModelSpec
from durable_agent._wire._contract import explain

from ._args import CommandError


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
