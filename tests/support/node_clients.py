"""The official JavaScript clients the gateway's tests drive, each a package under
``tests/clients/`` (``./run setup`` installs them with npm) run by a node script that
reads its request as JSON on stdin and writes one JSON line per thing it received
(``{"<kind>": ...}``), then ``{"done": ...}``."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLIENTS = Path(__file__).parents[1] / "clients"


def need_client(folder: str, package: str) -> Path:
    """The client's folder; fails (not skips) when node or the package is missing: CI
    installs both."""
    if shutil.which("node") is None:
        raise AssertionError("node is not installed (Debian's nodejs; .ci/run installs it)")
    client = CLIENTS / folder
    if not (client / "node_modules" / package).is_dir():
        raise AssertionError(f"{package} is not installed: npm ci --prefix {client}")
    return client


async def run_script(
    client: Path,
    script: str,
    given: Any,
    kind: str,
    on_item: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run ``script`` in ``client`` with ``given`` on stdin: every ``kind`` line it
    wrote, in order (``on_item`` sees each as it arrives), and its ``done`` line."""
    process = await asyncio.create_subprocess_exec(
        "node",
        str(client / script),
        cwd=client,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=2**24,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(given).encode())
    process.stdin.close()
    items: list[dict[str, Any]] = []
    done: dict[str, Any] | None = None
    while line := await asyncio.wait_for(process.stdout.readline(), 120):
        said = json.loads(line)
        if kind in said:
            items.append(said[kind])
            if on_item is not None:
                on_item(said[kind])
        else:
            done = said["done"]
    err = await process.stderr.read() if process.stderr else b""
    assert await process.wait() == 0 and done is not None, err.decode()[-2000:]
    return items, done
