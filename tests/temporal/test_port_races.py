"""The suite's servers on free ports: a port free when asked can be bound by another
test's process first. Then a connection succeeds, but to the other process (twice in
CI a test talked to another test's gateway). ``wait_for_port`` accepts only a listener
that the server it started holds, and ``started_on_free_port`` starts again elsewhere."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from durable_agent.temporal import _local as ports  # the module, to replace what it binds
from durable_agent.temporal._local import free_port
from tests import conftest
from tests.conftest import started_on_free_port, wait_for_port

LISTEN = """
import socket, sys, time
sock = socket.socket()
sock.bind(("127.0.0.1", int(sys.argv[1])))
sock.listen()
print("listening", flush=True)
time.sleep(120)
"""


def listener(port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", LISTEN, str(port)], stdout=subprocess.PIPE, text=True
    )


@contextmanager
def stopped_at_the_end(*processes: subprocess.Popen[str]) -> Iterator[None]:
    try:
        yield
    finally:
        for process in processes:
            process.kill()
            process.wait(10)


def test_a_listener_of_another_process_is_not_the_servers() -> None:
    squatter, port = started_on_free_port(listener)
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], text=True)
    with stopped_at_the_end(squatter, idle):
        with pytest.raises(RuntimeError, match=f"port {port} is another process's"):
            wait_for_port(port, idle)  # type: ignore[arg-type]
        wait_for_port(port, squatter)  # type: ignore[arg-type]


def test_a_server_whose_port_was_taken_starts_again_on_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first port it is given is another process's by the time it binds: it starts
    again on the next one, and the server is the one listening there."""
    squatter, taken = started_on_free_port(listener)
    free = iter([taken])
    monkeypatch.setattr(conftest, "_free_port", lambda: next(free, None) or free_port())
    asked: list[int] = []

    def start(port: int) -> subprocess.Popen[str]:
        asked.append(port)
        return listener(port)

    with stopped_at_the_end(squatter):
        server, port = started_on_free_port(start)
        with stopped_at_the_end(server):
            assert asked[0] == taken and port == asked[-1] != taken, asked
            wait_for_port(port, server)  # type: ignore[arg-type]
            assert server.poll() is None and squatter.poll() is None


def test_a_free_port_is_outside_the_range_connections_take_their_ports_from() -> None:
    """An outgoing connection takes its local port from the OS's range, and so does a
    ``bind`` to port 0: a port handed out there can be another process's address by
    the time a server binds it (a dev server's UI port, once in CI). ``free_port``
    chooses outside it, where neither reaches."""
    low, high = ports._ephemeral_range()
    with socket.create_server(("127.0.0.1", 0)) as server:
        connections = [socket.create_connection(server.getsockname()[:2]) for _ in range(50)]
        try:
            taken = {c.getsockname()[1] for c in connections}
        finally:
            for c in connections:
                c.close()
    assert all(low <= port <= high for port in taken), sorted(taken)
    chosen = {free_port() for _ in range(50)}
    assert not any(low <= port <= high for port in chosen), sorted(chosen)
    assert all(port >= ports.LOWEST for port in chosen), sorted(chosen)


def test_a_port_a_listener_or_a_connection_holds_is_never_chosen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ports it would choose first are held (one by a listener of another
    process, one as a connection's own address): it passes both."""
    squatter, listened = started_on_free_port(listener)
    with (
        stopped_at_the_end(squatter),
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.socket() as connection,
    ):
        connection.bind(("127.0.0.1", free_port()))
        connection.connect(server.getsockname()[:2])
        connected = connection.getsockname()[1]
        offered: list[int] = []

        class Choices:
            def __init__(self) -> None:
                self.first = iter([listened, connected])

            def choice(self, pool: list[int]) -> int:
                port = next(self.first, None) or random.Random().choice(pool)
                offered.append(port)
                return port

        monkeypatch.setattr(ports, "_choose", Choices())
        port = free_port()
        assert offered[:2] == [listened, connected] and port == offered[-1], offered
        assert port not in (listened, connected)
