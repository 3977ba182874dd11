"""Steering a running session: ``end``, ``cancel``, ``flush``, ``move`` (a swarm's
agent) and ``budget``, each as the person running the command."""

from __future__ import annotations

import argparse
from typing import TextIO

from durable_agent._client._client import AgentClient

from ._args import CommandError, who_am_i


async def cmd_end(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    await agents.session(args.session_id).end(by=who_am_i(), reason=args.reason)
    print(f"ending {args.session_id}", file=out)
    return 0


async def cmd_cancel(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    await agents.session(args.session_id).cancel_turn(by=who_am_i(), reason=args.reason)
    print(f"cancelling the current turn of {args.session_id}", file=out)
    return 0


async def cmd_flush(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    await agents.session(args.session_id).flush(by=who_am_i(), reason=args.reason)
    print(f"flushing {args.session_id} once its turn is over", file=out)
    return 0


async def cmd_move(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    status = await agents.session(args.session_id).status()
    if not status.agents:
        raise CommandError(f"move: session {args.session_id} has one agent")
    if args.agent not in status.agents:
        known = ", ".join(status.agents)
        raise CommandError(f"move: no agent {args.agent!r} in this session (agents: {known})")
    await agents.session(args.session_id).move_to_agent(
        args.agent, by=who_am_i(), reason=args.reason
    )
    print(f"moving {args.session_id} to {args.agent} at its next checkpoint", file=out)
    return 0


async def cmd_budget(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    if args.max_total_tokens is None and args.max_cost_usd is None:
        raise CommandError("budget: give --max-total-tokens, --max-cost-usd or both")
    await agents.session(args.session_id).set_budget(
        max_total_tokens=args.max_total_tokens,
        max_cost_usd=args.max_cost_usd,
        by=who_am_i(),
    )
    print(f"budget of {args.session_id} changed", file=out)
    return 0
