"""The command line's commands for a person acting on a session.

Approvals: decide (approve, with edits or "always"; deny; respond in the tool's place),
read the gate's rules and grants, revoke a grant, and make an approver's signing key.
Decisions go through the session's updates, so each command says at once whether it was
accepted, or why not (exit 2). Steering (below): ``end``, ``cancel``, ``flush``, ``move``
and ``budget``."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TextIO

from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.approvals import ApproverKey, DecisionResult
from durable_agent._spec.approval_policy import parse_test

from .args import CommandError, who_am_i
from .render import format_grant

KEY_ENV = "DURABLE_AGENT_APPROVER_KEY"
"""A key file (``durable-agent approver-key``) that signs this person's decisions."""

Command = Callable[[argparse.Namespace, TextIO, AgentClient], Any]


def add_approval_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    def decision(name: str, help: str) -> argparse.ArgumentParser:
        sub = command(name, help)
        sub.add_argument("session_id")
        sub.add_argument("approval_id")
        if name == "respond":
            sub.add_argument("content", help="the call's result, in the tool's place")
            sub.add_argument("--error", action="store_true", help="give it as an error result")
        sub.add_argument("--by", help="who decides (default: $USER; a key names its own)")
        sub.add_argument("--reason", help="why (a denial's reason is what the model reads)")
        sub.add_argument(
            "--key", default=os.environ.get(KEY_ENV), help=f"sign with this key file (${KEY_ENV})"
        )
        return sub

    approve = decision("approve", "approve a pending tool call")
    approve.add_argument("--edit", metavar="JSON", help="run it with these arguments instead")
    approve.add_argument(
        "--always", action="store_true", help="approve this tool's later calls too (this session)"
    )
    approve.add_argument(
        "--matching",
        action="append",
        default=[],
        metavar="TEST",
        help="with --always, only calls passing TEST, e.g. '$.amount <= 100' (repeatable)",
    )
    decision("deny", "deny a pending tool call (the model reads --reason)")
    decision("respond", "answer a pending tool call in the tool's place (it does not run)")
    rules = command("rules", "the session's approval rules, approvers and standing grants")
    rules.add_argument("session_id")
    revoke = command("revoke", "take back a standing grant (an --always approval)")
    revoke.add_argument("session_id")
    revoke.add_argument("grant_id")
    revoke.add_argument("--by")
    revoke.add_argument("--key", default=os.environ.get(KEY_ENV))
    key = command("approver-key", "make an approver's signing key", server=False)
    key.add_argument("name", help="the approver's name (as in approvals.approvers)")
    key.add_argument("--out", required=True, help="the private key file to write (keep it safe)")


def _key(args: argparse.Namespace) -> ApproverKey | None:
    if not args.key:
        return None
    try:
        return ApproverKey.from_file(args.key)
    except (OSError, ValueError) as error:
        raise CommandError(f"cannot use the key file {args.key}: {error}") from None


def _said(result: DecisionResult, session_id: str) -> str:
    verb = {"approve": "approved", "deny": "denied", "respond": "responded to", "revoke": "revoked"}
    who = f" by {result.by}" if result.by else ""
    return f"{verb[result.decision]} {result.approval_id} in {session_id}{who}"


async def cmd_decide(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    key, by = _key(args), args.by or who_am_i()
    session, aid = args.session_id, args.approval_id
    if args.command == "approve":
        try:
            edited = json.loads(args.edit) if args.edit is not None else None
        except ValueError as error:
            raise CommandError(f"--edit: not JSON ({error})") from None
        if edited is not None and not isinstance(edited, dict):
            raise CommandError("--edit: give the arguments as a JSON object")
        if args.matching and not args.always:
            raise CommandError("--matching goes with --always")
        try:
            tests = [parse_test(text) for text in args.matching]
        except ValueError as error:
            raise CommandError(f"--matching: {error}") from None
        always: Literal["tool", "matching"] | None = None
        if args.always:
            always = "matching" if tests else "tool"
        result = await agents.session(session).approve(
            aid, by=by, reason=args.reason, arguments=edited, always=always, matching=tests, key=key
        )
    elif args.command == "deny":
        result = await agents.session(session).deny(aid, by=by, reason=args.reason, key=key)
    else:
        result = await agents.session(session).respond(
            aid, args.content, is_error=args.error, by=by, reason=args.reason, key=key
        )
    said = _said(result, session)
    if args.command == "approve" and args.always:
        scope = " and ".join(args.matching) or "every call of its tool"
        said += f" (always: {'calls passing ' if args.matching else ''}{scope}; see `rules`)"
    print(said, file=out)
    return 0


async def cmd_rules(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    view = await agents.session(args.session_id).approval_policy()
    settings = view.settings
    print("rules (first match wins; no match: the tool's own policy):", file=out)
    for k, rule in enumerate(settings.rules):
        tests = " and ".join(str(t) for t in rule.when)
        if rule.predicate:
            tests = " and ".join(filter(None, [tests, f"{rule.predicate}(...)"]))
        when = f" when {tests}" if tests else ""
        print(f"  {settings.rule_name(k)}: {rule.action} {', '.join(rule.tools)}{when}", file=out)
    if not settings.rules:
        print("  none", file=out)
    anyone = "anyone" if settings.approvers is None else ", ".join(settings.approvers)
    signed = "no" if settings.accept_unsigned is False else "yes"
    if settings.accept_unsigned is None:
        signed = "yes" if settings.approvers is None else "no"
    print(f"approvers: {anyone} (unsigned decisions count: {signed})", file=out)
    for tool, names in sorted(view.tool_approvers.items()):
        print(f"  {tool}: {', '.join(names)}", file=out)
    print("grants:", file=out)
    for grant in view.grants:
        print(f"  {format_grant(grant)}", file=out)
    if not view.grants:
        print("  none", file=out)
    return 0


async def cmd_revoke(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    by = args.by or who_am_i()
    result = await agents.session(args.session_id).revoke_grant(
        args.grant_id, by=by, key=_key(args)
    )
    print(_said(result, args.session_id), file=out)
    return 0


def cmd_approver_key(args: argparse.Namespace, out: TextIO) -> int:
    """A new Ed25519 key: the private half to ``--out`` (mode 600), the public half printed
    as the entry for the workers' ``DURABLE_AGENT_APPROVER_KEYS`` file."""
    path = Path(args.out)
    if path.exists():
        raise CommandError(f"{path} exists: choose another --out (a key is never overwritten)")
    key = ApproverKey.generate(args.name)
    path.touch(mode=0o600)
    path.write_bytes(args.name.encode() + b"\n" + key.private_pem())
    print(json.dumps({args.name: key.public_pem()}), file=out)
    return 0


# Steering a running session: ``end``, ``cancel``, ``flush``, ``move`` (a swarm's
# agent) and ``budget``, each as the person running the command.

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
