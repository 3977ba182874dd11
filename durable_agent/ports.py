"""Free TCP ports on 127.0.0.1, for servers started on this machine (demo, tests, bench)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
