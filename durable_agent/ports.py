"""Free TCP ports on 127.0.0.1, for servers started on this machine (demo, tests, bench)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PortTaken(Exception):
    """A port a server of ours was to listen on is already taken."""


def claimable(port: int, what: str, flag: str) -> None:
    """Raise ``PortTaken`` when something listens on ``127.0.0.1:port`` already (the
    ``what`` port, chosen with ``flag``). A server started there would fail to bind
    while a client, connecting to the port, reached the other one: its sessions, and
    its end."""
    with socket.socket() as s:
        # as servers bind: a port whose last connections wait out TIME_WAIT (a dev
        # server stopped a moment ago) is free; one a socket listens on is not
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            raise PortTaken(
                f"{what} port {port} is taken (another Temporal server?): pass another "
                f"with {flag}, or connect to that one with `durable-agent worker --address`"
            ) from None
