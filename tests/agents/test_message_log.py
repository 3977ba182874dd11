"""The worker's message log (``JSONLMessageLog``): every
message of a session reaches the sink once, in array order, with its context (session,
index, turn, iteration, agent), those after the last model call too; a worker killed
with SIGKILL mid-call, its call retried by another worker, writes no line twice; a
session id never picks the file's path."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

from durable_agent._activities.message_log import session_file_stem
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._cli.render import MessageLog
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import Message, SystemMessage
from durable_agent.temporal import JSONLMessageLog, MessageContext
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import chat_stream_events, sse_reply
from tests.support import cli_tools
from tests.support.agent_harness import (
    KILL_HEARTBEAT_SECONDS,
    record_history,
    running_worker,
    spec_for,
    start_worker_process,
    wait_for,
)

registry = Registry([cli_tools.get_time])


def lines_of(directory: Path, session: str) -> list[dict[str, Any]]:
    folder = directory / session_file_stem(session)
    return [
        json.loads(line)
        for path in sorted(folder.glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def expected_lines(session: str, messages: list[Message]) -> list[dict[str, Any]]:
    """What the CLI's ``history --jsonl`` says of the same array (its context rules)."""
    log = MessageLog(session)
    expected = []
    for message in messages:
        line = json.loads(log.line(message))
        expected.append(line)
    return expected


def without_run(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in line.items() if k != "run_id"} for line in lines]


async def test_every_message_reaches_the_log_once_in_order_with_its_context(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [
        assistant_calls(("get_time", {"city": "NYC"})),
        assistant_text("It is 09:00 in NYC"),
        assistant_text("Tokyo: 22:00"),
    ]
    sink = JSONLMessageLog(tmp_path / "log")
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry, message_log=sink) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = spec_for(provider, ["get_time"], instructions="Be brief.", session={})
            sid = await agents.start(spec, "time in NYC?")
            await agents.session(sid).wait(timeout=60)
            # after the last model call: it reaches the log before the session waits
            await agents.session(sid).inject(SystemMessage(content="The user is in a hurry."))
            await wait_for(lambda: _count_is(tmp_path / "log", sid, 6))
            index = await agents.session(sid).send("and Tokyo?")
            await agents.session(sid).wait(after=index, timeout=60)
            await agents.session(sid).end()
            await agents.session(sid).result()
            messages = await agents.session(sid).messages()
            await record_history(client.get_workflow_handle(sid), "message_log")
    lines = lines_of(tmp_path / "log", sid)
    assert without_run(lines) == expected_lines(sid, messages)
    assert [line["index"] for line in lines] == list(range(len(messages))) == list(range(8))
    assert [(line["turn"], line["iteration"]) for line in lines] == [
        (0, 0),
        (1, 0),
        (1, 1),
        (1, 1),
        (1, 2),
        (1, 2),
        (2, 0),
        (2, 1),
    ]
    assert all(line["run_id"] for line in lines)


async def _count_is(directory: Path, session: str, count: int) -> bool:
    return len(lines_of(directory, session)) == count


async def test_a_worker_killed_mid_call_writes_no_line_twice(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The first worker has logged the array when it calls the model; it is killed
    while the model answers, and the retry on a second worker offers the same messages
    again: the log holds each once, in two files (one per worker start)."""
    released = threading.Event()
    held = dataclasses.replace(
        sse_reply(chat_stream_events(assistant_text("never seen"))), hold=released
    )
    script = [assistant_calls(("get_time", {"city": "Tokyo"})), held, assistant_text("22:00")]
    log_dir = tmp_path / "log"
    store = f"sqlite:///{tmp_path / 'transcripts.db'}"
    args = ("--message-log", str(log_dir), "--transcript-store", store)
    with ScriptedProvider(script) as provider:
        first = await asyncio.to_thread(start_worker_process, temporal_env, task_queue, *args)
        second = None
        try:
            agents = AgentClient(temporal_env.client, task_queue=task_queue, query_timeout=60)
            spec = spec_for(
                provider,
                ["get_time"],
                session={
                    "heartbeat_timeout_seconds": KILL_HEARTBEAT_SECONDS,
                    "end_after_reply": True,
                },
            )
            sid = await agents.start(spec, "time in Tokyo?")
            await wait_for(lambda: _requests_are(provider, 2), timeout=60)
            logged_before_kill = len(lines_of(log_dir, sid))
            first.kill()
            await asyncio.to_thread(first.wait)
            released.set()
            second = await asyncio.to_thread(start_worker_process, temporal_env, task_queue, *args)
            result = await asyncio.wait_for(agents.session(sid).result(), 120)
            messages = await agents.session(sid).messages()
        finally:
            for worker in (first, second):
                if worker is not None:
                    worker.kill()
    lines = lines_of(log_dir, sid)
    assert logged_before_kill == 3  # the user message, the call, its result
    assert result.status == "done" and messages[-1].content == "22:00"
    assert len(provider.requests) == 3  # the held call was asked again, elsewhere
    assert without_run(lines) == expected_lines(sid, messages)
    assert len(list((log_dir / session_file_stem(sid)).glob("*.jsonl"))) == 2


async def _requests_are(provider: ScriptedProvider, count: int) -> bool:
    return len(provider.requests) >= count


async def test_the_sink_skips_what_it_holds_and_keeps_session_ids_out_of_paths(
    tmp_path: Path,
) -> None:
    sink = JSONLMessageLog(tmp_path / "log")
    hostile = "../../etc/passwd"
    message = SystemMessage(content="hello")
    for index in (0, 1, 1, 0, 2):  # retried attempts offer indices again
        context = MessageContext(session=hostile, index=index, turn=0, iteration=0)
        await sink.append(message, context)
    folders = list((tmp_path / "log").iterdir())
    assert [p.name for p in folders] == [session_file_stem(hostile)]
    assert ".." not in folders[0].name and "/" not in folders[0].name
    assert [line["index"] for line in lines_of(tmp_path / "log", hostile)] == [0, 1, 2]
    assert await sink.logged(hostile) == 3
    # a line cut by a crash mid-write: not counted, cut off, written again whole
    path = next(folders[0].glob("*.jsonl"))
    path.write_bytes(path.read_bytes() + b'{"session": "../../etc/pa')
    fresh = JSONLMessageLog(tmp_path / "log")
    assert await fresh.logged(hostile) == 3
    await fresh.append(message, MessageContext(session=hostile, index=3, turn=0, iteration=0))
    assert [line["index"] for line in lines_of(tmp_path / "log", hostile)] == [0, 1, 2, 3]


async def test_two_workers_writing_their_own_files_in_turn_write_no_index_twice(
    tmp_path: Path,
) -> None:
    """A zombie attempt on one worker and its retry on another each write to their own
    file: every file counts when the sink decides what it holds."""
    old, new = JSONLMessageLog(tmp_path), JSONLMessageLog(tmp_path)
    message = SystemMessage(content="x")

    def at(index: int) -> MessageContext:
        return MessageContext(session="s", index=index, turn=0, iteration=0)

    for index in (0, 1, 2):
        await old.append(message, at(index))
    await new.append(message, at(3))
    await old.append(message, at(4))  # into the older file
    await new.append(message, at(4))  # offered again by the other worker: skipped
    await new.append(message, at(3))
    assert sorted(line["index"] for line in lines_of(tmp_path, "s")) == [0, 1, 2, 3, 4]
    assert len(list((tmp_path / session_file_stem("s")).glob("*.jsonl"))) == 2
    assert await new.logged("s") == 5
