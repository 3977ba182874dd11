"""A private PostgreSQL server for the tests, from Debian's `postgresql` package
(`.ci/run` installs it). Started in a temporary folder on a free port, stopped after."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from durable_agent.temporal._local import free_port


def postgres_bin() -> Path:
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not versions:
        raise RuntimeError(
            "PostgreSQL is not installed: `apt-get install postgresql` (the CI script does)"
        )
    return Path(versions[-1]).parent


class PostgresServer:
    """A private server in a temporary folder on a free port; ``stop`` and ``start``
    again keep its data and port (a database restart, as production has them).
    PostgreSQL refuses to run as root, so as root it runs as the `postgres` user the
    package creates."""

    def __init__(self) -> None:
        self.bin = postgres_bin()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.root = Path(tempfile.mkdtemp(prefix="durable-agent-pg-"))
        self.root.chmod(0o755)
        if self.as_user:
            shutil.chown(self.root, "postgres")
        self.data = self.root / "data"
        subprocess.run(
            [
                *self.as_user,
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "agent",
                "--auth=trust",
            ],
            check=True,
            capture_output=True,
        )
        self.port = free_port()
        self.url = f"postgresql://agent@127.0.0.1:{self.port}/postgres"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *self.as_user,
                str(self.bin / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-k",
                str(self.root),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        """A fast shutdown: open connections are cut, as in a database restart."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def running_postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.remove()


@contextmanager
def running_postgres() -> Iterator[str]:
    """Yield a connection URL to a fresh server."""
    with running_postgres_server() as server:
        yield server.url
