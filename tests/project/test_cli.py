"""The `durable-agent` command line, run as a separate process against the real server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pty
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, parse_messages
from durable_agent._spec.document import ModelPrice
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import Usage
from durable_agent.capabilities import Capabilities
from durable_agent.temporal._local import free_port
from durable_agent.testing import ScriptedProvider, TestModel, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import chat_stream_events, sse_reply
from tests.conftest import owns_listener
from tests.support import cli_tools
from tests.support.agent_harness import running_worker, spec_for

ROOT = Path(__file__).parent.parent.parent
registry = Registry([cli_tools.get_time, cli_tools.wipe_cache])
NO_MODEL_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DURABLE_AGENT_MODEL")


def cli(*args: str, address: str | None = None, stdin: str = "", timeout: float = 60) -> Any:
    env = {k: v for k, v in os.environ.items() if k not in NO_MODEL_ENV}
    if address:
        env["TEMPORAL_ADDRESS"] = address
    return subprocess.run(
        [sys.executable, "-m", "durable_agent._cli.main", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def acli(*args: str, **kw: Any) -> Any:
    return await asyncio.to_thread(cli, *args, **kw)


def address_of(env: WorkflowEnvironment) -> str:
    return str(env.client.service_client.config.target_host)


def write_spec(tmp_path: Path, provider: ScriptedProvider, tools: list[str], **kw: Any) -> str:
    spec = spec_for(provider, tools, session=kw.pop("session", {}), **kw)
    path = tmp_path / "spec.json"
    path.write_text(spec.model_dump_json(indent=2))
    return str(path)


async def test_run_follows_a_session_to_its_answer_and_history_reads_it_back(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [
        assistant_calls(("get_time", {"city": "NYC"}), ("wipe_cache", {"name": "tiles"})),
        assistant_text("It is 09:00 in NYC; tiles cache cleared."),
    ]
    address = address_of(temporal_env)
    with ScriptedProvider(script) as provider:
        spec = write_spec(tmp_path, provider, ["get_time", "wipe_cache"])
        async with running_worker(temporal_env, task_queue, registry):
            run = await acli(
                "run",
                "--spec",
                spec,
                "--task-queue",
                task_queue,
                "--yes",
                "--session-id",
                f"cli-run-{task_queue}",
                "time in NYC, then clear tiles",
                address=address,
            )
            sid = f"cli-run-{task_queue}"
            jsonl = await acli(
                "history", sid, "--jsonl", "--task-queue", task_queue, address=address
            )
            as_json = await acli(
                "history", sid, "--json", "--task-queue", task_queue, address=address
            )
            status = await acli(
                "status", sid, "--json", "--task-queue", task_queue, address=address
            )
            listed = await acli("sessions", "--limit", "100000", address=address)
            queried = await AgentClient(temporal_env.client).session(sid).messages()
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert f"session {sid}" in out
    assert '-> get_time {"city": "NYC"}' in out and "-> wipe_cache" in out
    assert "tool      get_time: 09:00" in out
    assert "assistant It is 09:00 in NYC; tiles cache cleared." in out
    assert "session ended: done (final_answer)" in out
    lines = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert parse_messages(lines) == queried == parse_messages(json.loads(as_json.stdout))
    assert [m["role"] for m in lines] == ["user", "assistant", "tool", "tool", "assistant"]
    assert lines[3]["approval"]["reason"] == "approved by --yes"
    assert json.loads(status.stdout)["phase"] == "done"
    assert sid in listed.stdout
    listed_line = next(line for line in listed.stdout.splitlines() if sid in line)
    assert listed_line.endswith("time in NYC, then clear tiles")  # the title memo


async def test_send_approve_deny_and_end_steer_a_live_session(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("wipe_cache", {"name": "a"}), ("wipe_cache", {"name": "b"})),
        assistant_text("a cleared, b kept"),
        assistant_text("bye"),
    ]
    address = address_of(temporal_env)
    queue = ("--task-queue", task_queue)
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec_for(provider, ["wipe_cache"], session={}), "clear")
            await agents.session(sid).wait(timeout=20)
            bad = await acli("approve", sid, "turn9-call9", *queue, address=address)
            ok = await acli("approve", sid, "turn1-call0", "--by", "ann", *queue, address=address)
            no = await acli(
                "deny", sid, "turn1-call1", "--reason", "keep b", *queue, address=address
            )
            reply = await agents.session(sid).wait(after=3, timeout=20)
            sent = await acli("send", sid, "thanks", *queue, address=address)
            await agents.session(sid).wait(after=6, timeout=20)
            ended = await acli("end", sid, "--reason", "done here", *queue, address=address)
            result = await agents.session(sid).result()
            closed = await acli("send", sid, "anyone?", *queue, address=address)
    assert bad.returncode == 2
    assert "no call waiting under 'turn9-call9'" in bad.stderr
    assert "(waiting: turn1-call0, turn1-call1)" in bad.stderr
    assert f"Use one of the waiting ids (`durable-agent status {sid}` lists them)" in bad.stderr
    assert ok.returncode == 0 and no.returncode == 0 and sent.returncode == 0, (
        ok.stderr,
        no.stderr,
        sent.stderr,
    )
    assert reply.reply and reply.reply.content == "a cleared, b kept"
    assert ended.returncode == 0 and result.stop_reason == "ended"
    assert closed.returncode == 2, closed.stderr
    assert "has ended" in closed.stderr or "the session is ending" in closed.stderr


async def test_chat_talks_to_one_session_until_an_empty_line(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [assistant_text("hello there"), assistant_text("22:00 in Tokyo")]
    with ScriptedProvider(script) as provider:
        spec = write_spec(tmp_path, provider, ["get_time"])
        async with running_worker(temporal_env, task_queue, registry):
            chat = await acli(
                "chat",
                "--spec",
                spec,
                "--task-queue",
                task_queue,
                stdin="hi\nwhat time is it in Tokyo?\n\n",
                address=address_of(temporal_env),
            )
    assert chat.returncode == 0, chat.stderr
    out = chat.stdout
    assert out.index("assistant hello there") < out.index("assistant 22:00 in Tokyo")
    assert "session ended: done (ended)" in out
    assert len(provider.requests) == 2


async def test_errors_say_what_to_fix(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    address = address_of(temporal_env)
    unreachable = await acli("sessions", address="127.0.0.1:1")
    unknown = await acli("status", "no-such-session", address=address)
    bad_spec = tmp_path / "bad.json"
    bad_spec.write_text(
        json.dumps({"model": {"name": ""}, "stop": {"max_turns": -1}, "colour": "blue"})
    )
    invalid = await acli("run", "--spec", str(bad_spec), "hi", address=address)
    broken = tmp_path / "broken.json"
    broken.write_text('{"model": {"name": "x"},')
    not_json = await acli("run", "--spec", str(broken), "hi", address=address)
    no_model = await acli("run", "hi", address=address)
    for done in (unreachable, unknown, invalid, not_json, no_model):
        assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "cannot reach Temporal at 127.0.0.1:1" in unreachable.stderr
    assert "no session with id 'no-such-session'" in unknown.stderr
    assert "model.name: String should have at least 1 character" in invalid.stderr
    assert "stop.max_turns: Input should be greater than or equal to 1" in invalid.stderr
    assert "colour: Extra inputs are not permitted" in invalid.stderr
    assert "Invalid JSON" in not_json.stderr
    # what to do instead, each way: a model by name, an agent of one's own, a spec
    assert "--model ENDPOINT:MODEL" in no_model.stderr
    assert "--agents MODULE --agent NAME" in no_model.stderr and "--spec FILE" in no_model.stderr
    not_named = await acli("run", "--model", "gpt-4o", "hi", address=address)
    assert not_named.returncode == 2 and "Traceback" not in not_named.stderr
    assert "'ENDPOINT:MODEL'" in not_named.stderr and "openai:gpt-4o-mini" in not_named.stderr


async def test_run_with_a_model_by_name_on_a_worker_that_answers_every_call(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """No spec and no key: ``--model ENDPOINT:MODEL`` names the model, and a worker that
    answers every model call (as ``durable-agent worker --model test``) answers it."""
    model = TestModel().start()
    try:
        capabilities = Capabilities(every_model=model.endpoint)
        async with running_worker(temporal_env, task_queue, Registry(), capabilities=capabilities):
            done = await acli(
                "run",
                "--model",
                "any:test-model",
                "--task-queue",
                task_queue,
                "Weather in Oslo?",
                address=address_of(temporal_env),
            )
    finally:
        model.stop()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert model.requests and model.requests[0].body["model"] == "test-model"


def _start_dev(data_dir: Path, port: int | None = None) -> tuple[subprocess.Popen[str], int]:
    """``durable-agent dev`` on ``port`` (else a free one), ready; started again on a
    free port when another test's process took the one it was given (it refuses a
    taken port; one taken between its check and its bind is caught by whose listener
    it is)."""
    for _ in range(3):
        port = port or free_port()
        process = _dev_on(data_dir, port)
        if process is not None and owns_listener(process.pid, port):
            return process, port
        if process is not None:
            process.kill()
            process.wait(10)
        port = None
    raise AssertionError("durable-agent dev found no free port in 3 tries")


def _dev_on(data_dir: Path, port: int) -> subprocess.Popen[str] | None:
    env = {k: v for k, v in os.environ.items() if k not in NO_MODEL_ENV}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durable_agent._cli.main",
            "dev",
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
            "--ui-port",
            str(free_port()),
            "--tools",
            "tests.support.cli_tools",
            "--trust-specs",
        ],  # the specs carry the scripted model's loopback endpoint
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    said: list[str] = []
    while True:
        line = process.stdout.readline()
        if not line and any("is taken" in s for s in said):
            process.wait(10)
            return None
        assert line, "durable-agent dev exited before its worker was ready:\n" + "".join(said)
        said.append(line)
        if line.startswith("worker ready"):
            assert "get_time" in line and "wipe_cache" in line
            # the policy is said out loud before the worker takes work
            assert any(s.startswith("WARNING: this worker lets session specs carry") for s in said)
            return process


async def _stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGINT)
    out, _ = await asyncio.to_thread(process.communicate, timeout=30)
    return process.returncode, out


async def test_dev_runs_server_and_worker_keeps_sessions_across_restarts(
    tmp_path: Path,
) -> None:
    script = [assistant_calls(("get_time", {"city": "Tokyo"})), assistant_text("22:00")]
    with ScriptedProvider(script) as provider:
        spec = write_spec(tmp_path, provider, ["get_time"])
        dev, port = await asyncio.to_thread(_start_dev, tmp_path / "data")
        try:
            run = await acli(
                "run",
                "--spec",
                spec,
                "--session-id",
                "persisted",
                "time?",
                address=f"127.0.0.1:{port}",
            )
        finally:
            code, out = await _stop(dev)
    assert run.returncode == 0, run.stderr
    assert code == 0 and "stopped" in out
    with socket.socket() as probe:  # Ctrl-C stopped the server too
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    assert (tmp_path / "data" / "temporal.sqlite").exists()
    # the same port again at once (its last connections wait out TIME_WAIT), unless
    # another test's process took it meanwhile
    dev, port = await asyncio.to_thread(_start_dev, tmp_path / "data", port)
    try:
        history = await acli("history", "persisted", "--jsonl", address=f"127.0.0.1:{port}")
    finally:
        await _stop(dev)
    assert history.returncode == 0, history.stderr
    roles = [json.loads(line)["role"] for line in history.stdout.splitlines()]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_dev_refuses_a_port_another_server_listens_on(tmp_path: Path) -> None:
    """``dev`` on a port something already listens on says so and stops: no server of
    its own, and no connection to the one there (its server failed to bind, and its
    worker quietly served the other's sessions until that one went away)."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        other.setblocking(False)
        port = other.getsockname()[1]
        done = cli(
            "dev",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            str(port),
            "--ui-port",
            str(free_port()),
            "--tools",
            "tests.support.cli_tools",
        )
        with pytest.raises(BlockingIOError):
            other.accept()  # nobody came
    assert done.returncode == 2, done.stderr
    assert f"server port {port} is taken" in done.stderr and "--port" in done.stderr
    assert not (tmp_path / "data" / "temporal.sqlite").exists()


def test_demo_runs_end_to_end_without_a_key(tmp_path: Path) -> None:
    demo = cli("demo", "--data-dir", str(tmp_path / "demo"), timeout=120)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    out = demo.stdout
    assert "model: the built-in demo model, over HTTP at http://127.0.0.1:" in out
    assert '-> get_weather {"city": "NYC"}' in out and '-> get_weather {"city": "London"}' in out
    assert "approval needed: turn2-call0: send_report" in out
    assert "approved turn2-call0 (SessionHandle.approve, by 'demo')" in out
    assert "The report went to" in out  # (the line wraps before the address)
    assert "session ended: done (ended), 3 model calls" in out
    assert "See it in the Temporal UI: http://127.0.0.1:" in out


async def test_run_on_a_terminal_shows_status_and_asks_before_each_approval(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """`run` attached to a terminal (a real pty): a live status line, and a y/n question
    per approval, answered on the keyboard."""

    script = [
        assistant_calls(("wipe_cache", {"name": "a"}), ("wipe_cache", {"name": "b"})),
        assistant_text("cleared a, kept b"),
    ]
    with ScriptedProvider(script) as provider:
        spec = write_spec(tmp_path, provider, ["wipe_cache"])
        async with running_worker(temporal_env, task_queue, registry):
            args = ["run", "--spec", spec, "--task-queue", task_queue, "clear both caches"]
            code, screen = await asyncio.to_thread(
                _run_on_terminal, args, address_of(temporal_env), ["y", "n"]
            )
    assert code == 0, screen
    assert "\x1b[2K[turn 1] awaiting approval (2)" in screen  # the live status line
    assert 'approve turn1-call0: wipe_cache(name="a")? [y/n]' in screen  # described_arguments
    assert 'approve turn1-call1: wipe_cache(name="b")? [y/n]' in screen
    assert "cache a cleared" in screen
    assert "Tool call denied by" in screen and "declined at the terminal" in screen
    assert "session ended: done (final_answer)" in screen


def _run_on_terminal(args: list[str], address: str, answers: list[str]) -> tuple[int, str]:
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in NO_MODEL_ENV}
    env["TEMPORAL_ADDRESS"] = address
    process = subprocess.Popen(
        [sys.executable, "-m", "durable_agent._cli.main", *args],
        cwd=ROOT,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    screen = _converse_on_terminal(leader, answers)
    code = process.wait(60)
    os.close(leader)
    return code, screen


def _converse_on_terminal(leader: int, answers: list[str]) -> str:
    """Read the terminal until the process exits, typing an answer at each [y/n]."""
    screen, pending = "", list(answers)
    while True:
        try:
            chunk = os.read(leader, 4096).decode(errors="replace")
        except OSError:  # the process closed the terminal
            return screen
        if not chunk:
            return screen
        screen += chunk
        while pending and screen.count("[y/n]") > len(answers) - len(pending):
            os.write(leader, (pending.pop(0) + "\n").encode())


def _children(pid: int) -> list[int]:
    """The process's direct children (Linux /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_demo_keep_stopped_by_a_signal_stops_the_server_it_started(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """As a service manager (or a script's `kill -INT`) stops it: to its pid only. The
    process starts with SIGINT ignored, as a background job of a script does."""
    env = {k: v for k, v in os.environ.items() if k not in NO_MODEL_ENV}
    demo = subprocess.Popen(
        [sys.executable, "-m", "durable_agent._cli.main", "demo", "--keep", "--data-dir", tmp_path],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert demo.stdout is not None
        for line in demo.stdout:
            if "stays up" in line:
                break
        servers = _children(demo.pid)
        assert servers and all(_alive(p) for p in servers), "the demo runs a dev server"
        demo.send_signal(signum)
        demo.wait(timeout=30)
        assert not any(_alive(p) for p in servers), "the dev server outlived the demo"
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()


async def test_run_prints_the_answer_as_it_streams(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The answer's first words reach the terminal well before its last ones. The stream
    stops at a barrier after its first pieces until the terminal shows them (paced
    alone, a loaded machine's terminal could see the answer only once it was whole)."""
    answer = "Streaming, one piece at a time: the first words arrive long before the last."
    shown = threading.Event()
    stream = sse_reply(chat_stream_events(assistant_text(answer)), delay=0.02)
    script = [dataclasses.replace(stream, hold=shown, hold_after=3)]
    with ScriptedProvider(script) as provider:
        spec = write_spec(tmp_path, provider, [])
        async with running_worker(temporal_env, task_queue, registry):
            env = {k: v for k, v in os.environ.items() if k not in NO_MODEL_ENV}
            env["TEMPORAL_ADDRESS"] = address_of(temporal_env)
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "durable_agent._cli.main",
                "run",
                "--spec",
                spec,
                "--task-queue",
                task_queue,
                "say something",
                cwd=ROOT,
                env=env,
                stdout=asyncio.subprocess.PIPE,
            )
            assert process.stdout is not None
            seen, arrivals = "", []
            while chunk := await process.stdout.read(64):
                seen += chunk.decode()
                arrivals.append((len(provider.sent), seen))
                if "Streaming," in seen:
                    shown.set()
            assert await process.wait() == 0
    # by order, not by clock: the first words were on the terminal while the provider
    # still had pieces of the answer to send
    written_then = next(sent for sent, text in arrivals if "Streaming," in text)
    assert written_then < len(script[0].chunks), (written_then, len(script[0].chunks))
    assert f"assistant {answer}\n" in seen and "session ended: done (final_answer)" in seen


def body_of(lines: list[str]) -> str:
    return "\n".join(lines[1:])


async def test_trace_prints_the_timeline_and_draws_it(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """Two model calls, two tool runs and one approval a person took 0.6 s over, across
    a continue-as-new, as text and as a picture."""
    script = [
        assistant_calls(("wipe_cache", {"name": "tiles"}), ("get_time", {"city": "NYC"})),
        assistant_text("tiles cleared; 09:00 in NYC"),
        # the provider's cache served 6 of the last call's 10 input tokens
        assistant_text("bye", usage=Usage(prompt_tokens=10, completion_tokens=5, cached_tokens=6)),
    ]
    address = address_of(temporal_env)
    queue = ("--task-queue", task_queue)
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = spec_for(
                provider, ["wipe_cache", "get_time"], session={"continue_as_new_after_events": 20}
            )
            price = ModelPrice(input_per_million=1000, output_per_million=2000)
            spec = spec.model_copy(update={"model": spec.model.model_copy(update={"price": price})})
            sid = await agents.start(spec, "clear tiles, time in NYC")
            # waits as guards against a hang: beside a second copy of the suite, a
            # session continuing as new every 20 events took longer than 30 s
            asked = await agents.session(sid).wait(timeout=120)
            await asyncio.sleep(0.6)
            await agents.session(sid).approve(asked.pending[0].approval_id, by="ana")
            await agents.session(sid).wait(after=4, timeout=120)
            await agents.session(sid).send("thanks")
            await agents.session(sid).wait(after=5, timeout=120)
            runs = (await agents.session(sid).status()).runs
            picture = tmp_path / "trace.html"
            traced = await acli("trace", sid, "--html", str(picture), *queue, address=address)
            unknown = await acli("trace", "no-such-session", *queue, address=address)
    assert runs > 1, "the session continued as new: the trace reads every run"
    assert traced.returncode == 0, traced.stderr
    print(f"\n{traced.stdout}")
    lines = traced.stdout.splitlines()
    assert lines[0].startswith(f"session {sid}: 3 model calls")
    assert "3 model calls" in lines[0] and "2 tool runs" in lines[0] and "1 approvals" in lines[0]
    assert "30 in (6 cached) / 15 out tokens, $0.0600" in lines[0]  # by the model's price
    assert "scripted-model: 10 in (6 cached) / 5 out $0.0200" in body_of(lines)
    body = "\n".join(lines[1:])
    assert "turn 1   model" in body
    assert "scripted-model: 10 in / 5 out $0.0200  2 tool calls" in body
    assert body.count("scripted-model: ") == 3  # the run after continue-as-new too
    [approval] = [line for line in lines if "approval wipe_cache" in line]
    assert approval.rstrip().endswith("approved by ana"), approval
    waited = float(approval.split(" s  ")[1].split()[-1])
    # from the history: asked before the test saw the approval, decided after the test
    # held its decision back 0.6 s (a lower bound by construction, not a speed target)
    assert waited >= 0.6, approval
    assert any("tool wipe_cache" in line for line in lines)
    assert any("tool get_time" in line for line in lines)
    assert "turn 3   model" in body, "the model call of the run after continue-as-new"
    page = picture.read_text()
    assert page.count('<g class="model">') == 3 and page.count('<g class="tool">') == 2
    assert page.count('<g class="approval">') == 1 and "approved by ana" in page
    assert unknown.returncode == 2 and "no session" in unknown.stderr


async def test_history_jsonl_follow_streams_the_message_log_with_context(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Followed from the middle of a live session to its end: every message once, in
    order, with its session, turn and iteration; the ones that land while it follows
    with their run too; the earlier ones from the array."""
    script = [assistant_calls(("get_time", {"city": "NYC"})), assistant_text("09:00 in NYC")]
    address = address_of(temporal_env)
    queue = ("--task-queue", task_queue)
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec_for(provider, ["get_time"], session={}), "time?")
            await agents.session(sid).wait(after=1, timeout=30)
            env = {k: v for k, v in os.environ.items() if k not in NO_MODEL_ENV}
            env["TEMPORAL_ADDRESS"] = address
            follower = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "durable_agent._cli.main",
                "history",
                sid,
                "--jsonl",
                "--follow",
                *queue,
                cwd=ROOT,
                env=env,
                stdout=asyncio.subprocess.PIPE,
            )
            assert follower.stdout is not None
            early = [json.loads(await follower.stdout.readline()) for _ in range(4)]
            provider.add(sse_reply(chat_stream_events(assistant_text("welcome")), delay=0.05))
            await agents.session(sid).send("thanks")
            await agents.session(sid).wait(after=5, timeout=30)
            await agents.session(sid).end()
            rest = (await asyncio.wait_for(follower.stdout.read(), 60)).decode()
            assert await follower.wait() == 0
            context = await acli("history", sid, "--jsonl", "--context", *queue, address=address)
            refused = await acli("history", sid, "--follow", *queue, address=address)
    lines = early + [json.loads(line) for line in rest.splitlines()]
    assert [line["index"] for line in lines] == list(range(6)), "each message once, in order"
    assert {line["session"] for line in lines} == {sid}
    assert [(line["turn"], line["iteration"]) for line in lines] == [
        (1, 0),
        (1, 1),
        (1, 1),
        (1, 2),
        (2, 0),
        (2, 1),
    ]
    assert [line["message"]["role"] for line in lines] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert [line.get("run") for line in lines[4:]] == [1, 1], "followed live: the run too"
    assert lines[-1]["message"]["content"] == "welcome"
    read_after = [json.loads(line) for line in context.stdout.splitlines()]
    assert read_after == [{k: v for k, v in line.items() if k != "run"} for line in lines]
    assert refused.returncode == 2 and "--jsonl" in refused.stderr


async def test_run_with_no_worker_says_whom_to_start_and_exits_2(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The command stops within the client's bound, saying no worker polls the queue
    and that the session stays running; a worker that comes later runs it."""
    with ScriptedProvider([assistant_text("answered later")]) as provider:
        spec = write_spec(tmp_path, provider, [])
        nobody = f"{task_queue}-nobody"
        ran = await acli(
            "run",
            "--spec",
            spec,
            "--task-queue",
            nobody,
            "hello",
            address=address_of(temporal_env),
            timeout=120,
        )
        assert ran.returncode == 2, ran.stdout + ran.stderr
        assert "no worker" in ran.stderr and "durable-agent worker" in ran.stderr, ran.stderr
        assert provider.requests == [], "nothing ran"
        # the session it started stays, and runs once a worker polls its queue
        assert "The session stays running and nothing is lost: it goes on as soon as a " in (
            " ".join(ran.stderr.split())
        )
        assert f"polls task queue {nobody!r}." in ran.stderr
        sid = ran.stdout.split()[1]
        agents = AgentClient(temporal_env.client, task_queue=nobody)
        async with running_worker(temporal_env, nobody, registry):
            result = await agents.session(sid).result()
    assert result.final is not None and result.final.content == "answered later"
    assert len(provider.requests) == 1


def test_a_decision_in_the_records_words_is_refused_naming_the_commands() -> None:
    """The CLI's decisions are ``approve``, ``deny`` and ``respond``, the words every
    entry takes; ``approved`` (what a record says afterwards) is no command, and the
    refusal lists the right ones, before any server is asked."""
    refused = cli("approved", "s-1", "turn1-call0", address="127.0.0.1:9")
    assert refused.returncode == 2
    assert "invalid choice: 'approved'" in refused.stderr
    assert all(f"'{word}'" in refused.stderr for word in ("approve", "deny", "respond"))
