"""``durable-agent``: run the server and worker, start and follow sessions, decide approvals.

Every command but ``dev``, ``worker`` and ``demo`` is a client: it talks to Temporal
(signals, queries, visibility), never to a worker directly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO, cast

from temporalio.client import WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._client.results import (
    DecisionRefusedError,
    MessageRefusedError,
    NoWorkerError,
    SessionClosedError,
    SessionExistsError,
    SessionFailedError,
    SessionNotFoundError,
    SpecError,
    UnknownApprovalError,
)
from durable_agent._client.sessions import AgentClient
from durable_agent._connection import ServerUnreachableError
from durable_agent._contracts.approvals import PendingApproval
from durable_agent._observability.logs import configure_logging
from durable_agent._payloads.encryption import CodecKeyError
from durable_agent._wire.messages import AssistantMessage, SystemMessage, visible
from durable_agent.capabilities._config_file import CapabilitiesFileError
from durable_agent.temporal._local import PortTaken
from durable_agent.temporal._plugin import AgentModuleError
from durable_agent.temporal._process import Stopped, exit_without_teardown, stoppable

from .args import (
    CommandError,
    add_agent_arguments,
    add_model_argument,
    add_server_arguments,
    add_worker_arguments,
    load_spec,
    server_settings,
    who_am_i,
)
from .branches import add_branch_commands, cmd_diff, cmd_fork, session_lines
from .decisions import (
    add_approval_commands,
    cmd_approver_key,
    cmd_budget,
    cmd_cancel,
    cmd_decide,
    cmd_end,
    cmd_flush,
    cmd_move,
    cmd_revoke,
    cmd_rules,
)
from .evals import (
    add_check_replay_command,
    add_eval_command,
    add_replay_command,
    cmd_check_replay,
    cmd_eval,
    cmd_replay,
)
from .follow import Approver, follow, write_message_log
from .memory import add_memory_command, cmd_memory
from .render import VisibleWriter, format_history, format_pending, format_status, message_json
from .schedules import add_schedule_command, cmd_schedule
from .serve import add_mcp_serve_command, add_serve_arguments, cmd_gateway, cmd_mcp_serve
from .trace import cmd_trace
from .versions import add_versions_command, cmd_versions
from .wake_ups import add_wake_ups_command, cmd_wake_ups

EXIT_OK, EXIT_SESSION_FAILED, EXIT_USAGE = 0, 1, 2


# --- arguments shared with worker.py ----------------------------------------------------


def terminal_approver(out: TextIO) -> Approver:
    async def ask(pending: PendingApproval) -> tuple[bool, str | None]:
        prompt = f"approve {format_pending(pending)}? [y/n] "
        while True:
            print(prompt, end="", file=out, flush=True)
            answer = (await asyncio.to_thread(sys.stdin.readline)).strip().lower()
            if answer in ("y", "yes"):
                return True, None
            if answer in ("n", "no", ""):
                return False, "declined at the terminal"

    return ask


async def approve_everything(pending: PendingApproval) -> tuple[bool, str | None]:
    return True, "approved by --yes"


# --- commands -------------------------------------------------------------------------------


async def connect(args: argparse.Namespace) -> AgentClient:
    return await AgentClient.connect(server_settings(args), task_queue=args.task_queue)


def _approver(args: argparse.Namespace, out: TextIO) -> Approver | None:
    if args.yes:
        return approve_everything
    return terminal_approver(out) if sys.stdin.isatty() else None


async def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    spec = load_spec(args)
    spec = spec.model_copy(
        update={"session": spec.session.model_copy(update={"end_after_reply": True})}
    )
    agents = await connect(args)
    session_id = await agents.start(
        spec, args.prompt, session_id=args.session_id, restart=args.restart, resume=args.resume
    )
    print(f"session {session_id}", file=out, flush=True)
    # a worker must answer within the client's wait: else NoWorkerError says whom to start
    await agents.session(session_id).status()
    await follow(agents, session_id, after=-1, before=0, approver=_approver(args, out), out=out)
    try:
        result = await agents.session(session_id).result()
    except WorkflowFailureError as error:  # refused at start, or input it could not read
        print(f"session failed: {failure_sentence(error)}", file=out, flush=True)
        return EXIT_SESSION_FAILED
    return _report_end(result, out)


def failure_sentence(error: WorkflowFailureError) -> str:
    """The whole reason a session failed and what to do about it: a ``SessionFailedError``
    says both; Temporal's own error says at least the cause."""
    if isinstance(error, SessionFailedError):
        return str(error)
    return str(error.cause or error)


def _report_end(result: Any, out: TextIO) -> int:
    line = f"session ended: {result.status} ({result.stop_reason})"
    if result.error:
        line += f": {result.error}"
    print(line, file=out, flush=True)
    return EXIT_OK if result.status == "done" else EXIT_SESSION_FAILED


async def cmd_chat(args: argparse.Namespace, out: TextIO) -> int:
    agents = await connect(args)
    if args.session_id and await _running(agents, args.session_id):
        session_id = args.session_id
    else:
        session_id = await agents.start(
            load_spec(args), session_id=args.session_id, restart=args.restart, resume=args.resume
        )
    print(f"session {session_id} (an empty line or Ctrl-D ends it)", file=out, flush=True)
    approver = _approver(args, out)
    while True:
        print("you> ", end="", file=out, flush=True)
        text = (await asyncio.to_thread(sys.stdin.readline)).rstrip("\n")
        if not text.strip():
            await agents.session(session_id).end(by=who_am_i(), reason="chat closed")
            return _report_end(await agents.session(session_id).result(), out)
        after = await agents.session(session_id).latest_offset()
        before = await agents.session(session_id).send(text)
        state = await follow(
            agents, session_id, after=after, before=before, approver=approver, out=out
        )
        if state == "ended":
            return _report_end(await agents.session(session_id).result(), out)


async def _running(agents: AgentClient, session_id: str) -> bool:
    try:
        return not await agents.session(session_id).has_ended()
    except SessionNotFoundError:
        return False


async def cmd_send(args: argparse.Namespace, out: TextIO) -> int:
    agents = await connect(args)
    await agents.session(args.session_id).send(args.text)
    print(f"sent to {args.session_id}", file=out)
    return EXIT_OK


async def cmd_inject(args: argparse.Namespace, out: TextIO) -> int:
    agents = await connect(args)
    kind = SystemMessage if args.role == "system" else AssistantMessage
    await agents.session(args.session_id).inject(kind(content=args.text))
    print(f"{args.role} message added to {args.session_id} at its next checkpoint", file=out)
    return EXIT_OK


def with_client(
    command: Callable[[argparse.Namespace, TextIO, AgentClient], Coroutine[Any, Any, int]],
) -> Callable[[argparse.Namespace, TextIO], Coroutine[Any, Any, int]]:
    async def run(args: argparse.Namespace, out: TextIO) -> int:
        return await command(args, out, await connect(args))

    return run


async def cmd_key(args: argparse.Namespace, out: TextIO) -> int:
    return cmd_approver_key(args, out)


async def cmd_status(args: argparse.Namespace, out: TextIO) -> int:
    agents = await connect(args)
    status = await agents.session(args.session_id).status()
    print(status.model_dump_json(indent=2) if args.json else format_status(status), file=out)
    return EXIT_OK


async def cmd_history(args: argparse.Namespace, out: TextIO) -> int:
    agents = await connect(args)
    if args.follow or args.context:
        if not args.jsonl:
            raise CommandError("--follow and --context write the message log: add --jsonl")
        await write_message_log(agents, args.session_id, out, follow=args.follow)
        return EXIT_OK
    messages = await agents.session(args.session_id).messages()
    if args.json:
        dumped = [m.model_dump(mode="json", exclude_none=True) for m in messages]
        print(json.dumps(dumped, indent=2, ensure_ascii=False), file=out)
    elif args.jsonl:
        for message in messages:
            print(message_json(message), file=out)
    else:
        for line in format_history(messages):
            print(line, file=out)
    return EXIT_OK


async def cmd_sessions(args: argparse.Namespace, out: TextIO) -> int:
    agents = await connect(args)
    for line in session_lines(await agents.sessions(limit=args.limit)):
        print(line, file=out)
    return EXIT_OK


async def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    from .worker import serve  # the worker owns the process: server, tools, signals

    args.dev = args.command == "dev"
    await serve(args)
    return EXIT_OK


async def cmd_prune(args: argparse.Namespace, out: TextIO) -> int:
    from .worker import prune_transcripts  # the workers' store is the worker's business

    try:
        removed = await prune_transcripts(args, args.older_than_days * 86400)
    except ValueError as error:
        raise CommandError(str(error)) from None
    print(f"removed {removed} stored messages older than {args.older_than_days:g} days", file=out)
    return EXIT_OK


async def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from .demo import run_demo

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    configure_logging("warning")  # the transcript is the demo's output

    return await run_demo(Path(args.data_dir), keep=args.keep, out=say)


COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO], Coroutine[Any, Any, int]]] = {
    "serve": cmd_gateway,
    "mcp-serve": cmd_mcp_serve,
    "dev": cmd_serve,
    "worker": cmd_serve,
    "demo": cmd_demo,
    "run": cmd_run,
    "chat": cmd_chat,
    "send": cmd_send,
    "inject": cmd_inject,
    "approve": with_client(cmd_decide),
    "deny": with_client(cmd_decide),
    "respond": with_client(cmd_decide),
    "rules": with_client(cmd_rules),
    "revoke": with_client(cmd_revoke),
    "approver-key": cmd_key,
    "end": with_client(cmd_end),
    "cancel": with_client(cmd_cancel),
    "flush": with_client(cmd_flush),
    "move": with_client(cmd_move),
    "budget": with_client(cmd_budget),
    "status": cmd_status,
    "history": cmd_history,
    "trace": with_client(cmd_trace),
    "sessions": cmd_sessions,
    "fork": with_client(cmd_fork),
    "eval": with_client(cmd_eval),
    "replay": with_client(cmd_replay),
    "schedule": with_client(cmd_schedule),
    "wake-ups": with_client(cmd_wake_ups),
    "versions": with_client(cmd_versions),
    "check-replay": cmd_check_replay,
    "diff": with_client(cmd_diff),
    "prune-transcripts": cmd_prune,
    "memory": cmd_memory,
}


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive whole number")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive amount")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="durable-agent", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, *, server: bool = True) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        if server:
            add_server_arguments(sub)
        return sub

    for name, what in (
        ("dev", "embedded Temporal dev server and a worker; Ctrl-C stops both"),
        ("worker", "a worker for an existing Temporal server"),
    ):
        serving = command(name, what)
        add_worker_arguments(serving)
        add_model_argument(serving)
    demo = command("demo", "run the sample agent end to end on a fresh machine", server=False)
    demo.add_argument("--data-dir", default=os.path.join(".data", "demo"))
    demo.add_argument("--keep", action="store_true", help="keep the server up for the UI")

    for name, help in (
        ("run", "start a session with a prompt and follow it to the end"),
        ("chat", "talk to one session, message after message"),
    ):
        sub = command(name, help)
        sub.add_argument("--spec", help="agent spec JSON file (default: model from environment)")
        add_agent_arguments(sub)
        sub.add_argument(
            "--model",
            help="ENDPOINT:MODEL for the default spec, its endpoint one the worker registered "
            "(a worker started with --model test or demo answers any)",
        )
        sub.add_argument("--tool", action="append", default=[], help="tool for the default spec")
        sub.add_argument("--instructions", help="system prompt for the default spec")
        sub.add_argument("--session-id", help="session id (default: generated)")
        again = sub.add_mutually_exclusive_group()
        again.add_argument(
            "--resume", action="store_true", help="go on with an ended session's conversation"
        )
        again.add_argument(
            "--restart", action="store_true", help="start over an ended session of that id"
        )
        sub.add_argument("--yes", action="store_true", help="approve every tool call")
        if name == "run":
            sub.add_argument("prompt")

    send = command("send", "send a message to a session")
    send.add_argument("session_id")
    send.add_argument("text")
    inject = command("inject", "add a system notice or an assistant message (starts no turn)")
    inject.add_argument("session_id")
    inject.add_argument("text")
    inject.add_argument("--role", choices=["system", "assistant"], default="system")
    add_approval_commands(command)
    end = command("end", "end a session")
    end.add_argument("session_id")
    end.add_argument("--reason")
    cancel = command("cancel", "stop a session's current turn (the session goes on)")
    cancel.add_argument("session_id")
    cancel.add_argument("--reason")
    flush = command("flush", "later requests start afresh (system messages and what follows)")
    flush.add_argument("session_id")
    flush.add_argument("--reason")
    move = command("move", "move a swarm session to another agent (at its next checkpoint)")
    move.add_argument("session_id")
    move.add_argument("agent")
    move.add_argument("--reason")
    budget = command("budget", "change a session's token or cost budget")
    budget.add_argument("session_id")
    budget.add_argument("--max-total-tokens", type=_positive_int)
    budget.add_argument("--max-cost-usd", type=_positive_float)
    status = command("status", "what a session is doing")
    status.add_argument("session_id")
    status.add_argument("--json", action="store_true")
    trace = command("trace", "a session's timeline: model calls, tools, approval waits")
    trace.add_argument("session_id")
    trace.add_argument(
        "--html",
        "--out",
        dest="html",
        metavar="FILE",
        help="also draw the timeline as an HTML page into FILE (nothing is written without it)",
    )
    history = command("history", "a session's messages")
    history.add_argument("session_id")
    form = history.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="one JSON array")
    form.add_argument("--jsonl", action="store_true", help="one message a line")
    history.add_argument(
        "--context", action="store_true", help="with --jsonl: each line with its context"
    )
    history.add_argument(
        "--follow",
        action="store_true",
        help="with --jsonl: go on as messages land (implies --context)",
    )
    add_branch_commands(command)
    add_eval_command(command)
    add_replay_command(command)
    add_schedule_command(command)
    add_wake_ups_command(command)
    add_versions_command(command)
    add_mcp_serve_command(command)
    add_check_replay_command(command)
    sessions = command("sessions", "sessions on the server, newest first (branches indented)")
    sessions.add_argument("--limit", type=int, default=50)
    add_serve_arguments(
        command("serve", "the HTTP gateway (REST, SSE events, AG-UI) and the web console")
    )
    prune = command("prune-transcripts", "drop stored transcript messages by age", server=False)
    add_worker_arguments(prune)
    prune.add_argument("--older-than-days", type=float, required=True)
    add_memory_command(command)
    return parser


ACTIONABLE = (
    AgentModuleError,
    CodecKeyError,
    CapabilitiesFileError,
    CommandError,
    ServerUnreachableError,
    SessionNotFoundError,
    SessionClosedError,
    SessionExistsError,
    UnknownApprovalError,
    DecisionRefusedError,
    MessageRefusedError,
    SpecError,
    NoWorkerError,
    PortTaken,
)


#: What to do about each of Temporal's refusals.
RPC_NEXT_STEPS = {
    RPCStatusCode.NOT_FOUND: "check the session id and --namespace",
    RPCStatusCode.ALREADY_EXISTS: "use another id, or end the one there first",
    RPCStatusCode.FAILED_PRECONDITION: "start a worker for the session's task queue "
    "(durable-agent worker --task-queue ...)",
    RPCStatusCode.PERMISSION_DENIED: "check the API key or certificate (--api-key, --tls-cert)",
    RPCStatusCode.UNAUTHENTICATED: "check the API key or certificate (--api-key, --tls-cert)",
    RPCStatusCode.INVALID_ARGUMENT: "check the command's arguments",
    RPCStatusCode.RESOURCE_EXHAUSTED: "the server is rate limiting: try again shortly",
    RPCStatusCode.DEADLINE_EXCEEDED: "the server did not answer in time: try again",
    RPCStatusCode.UNAVAILABLE: "is the Temporal server running at --address?",
}


def rpc_sentence(error: RPCError) -> str:
    """A Temporal refusal as one sentence, with what to do about it."""
    step = RPC_NEXT_STEPS.get(error.status, "try again, or see the server's log")
    return f"Temporal refused the request: {error.message or error.status.name} ({step})"


def run_command(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit status (for use from Python)."""
    args = build_parser().parse_args(argv)
    out = cast(TextIO, VisibleWriter(sys.stdout))  # session text cannot drive the terminal
    try:
        return asyncio.run(stoppable(COMMANDS[args.command](args, out)))
    except ACTIONABLE as error:
        print(f"durable-agent: {visible(str(error), keep=chr(10))}", file=sys.stderr)
        return EXIT_USAGE
    except RPCError as error:  # any other refusal of Temporal's, said as a sentence
        print(f"durable-agent: {rpc_sentence(error)}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader went away (``| head``): nothing more to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's last flush is quiet
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Stopped as stopped:  # after everything it started has stopped
        return stopped.exit_status


def main() -> NoReturn:
    exit_without_teardown(run_command())


if __name__ == "__main__":
    main()
