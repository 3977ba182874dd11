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

from durable_agent.ports import free_port


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


@contextmanager
def running_postgres() -> Iterator[str]:
    """Yield a connection URL to a fresh server; PostgreSQL refuses to run as root, so
    as root it runs as the `postgres` user the package creates."""
    bin_dir = postgres_bin()
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    root = Path(tempfile.mkdtemp(prefix="durable-agent-pg-"))
    root.chmod(0o755)
    if as_user:
        shutil.chown(root, "postgres")
    data = root / "data"
    subprocess.run(
        [*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "agent", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    server = subprocess.Popen(
        [*as_user, str(bin_dir / "postgres"), "-D", str(data), "-p", str(port),
         "-k", str(root), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL did not start")
            time.sleep(0.1)
        yield f"postgresql://agent@127.0.0.1:{port}/postgres"
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
