"""The official AG-UI client (npm ``@ag-ui/client``'s ``HttpAgent``), run by node from
``tests/clients/agui`` (``./run setup`` installs it): one ``runAgent`` per call, its
events in the order received, the messages and state the client ends with."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLIENT = Path(__file__).parents[1] / "clients" / "agui"


def need_agui_client() -> None:
    """Fail (not skip) when node or the client is missing: CI installs both."""
    if shutil.which("node") is None:
        raise AssertionError("node is not installed (Debian's nodejs; .ci/run installs it)")
    if not (CLIENT / "node_modules" / "@ag-ui" / "client").is_dir():
        raise AssertionError(f"@ag-ui/client is not installed: npm ci --prefix {CLIENT}")


async def run_agent(
    url: str,
    thread_id: str,
    messages: list[dict[str, Any]],
    on_event: Callable[[dict[str, Any]], None] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """One run of the official client against ``url``: ``{events, messages, state,
    error}`` (``on_event`` sees each event as it arrives; ``more``: ``headers``,
    ``runId``, ``resume``)."""
    need_agui_client()
    process = await asyncio.create_subprocess_exec(
        "node",
        str(CLIENT / "run.mjs"),
        cwd=CLIENT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=2**24,
    )
    assert process.stdin is not None and process.stdout is not None
    given = {"url": url, "threadId": thread_id, "messages": messages, **more}
    process.stdin.write(json.dumps(given).encode())
    process.stdin.close()
    events: list[dict[str, Any]] = []
    done: dict[str, Any] | None = None
    while line := await asyncio.wait_for(process.stdout.readline(), 120):
        said = json.loads(line)
        if "event" in said:
            events.append(said["event"])
            if on_event is not None:
                on_event(said["event"])
        else:
            done = said["done"]
    err = await process.stderr.read() if process.stderr else b""
    assert await process.wait() == 0 and done is not None, err.decode()[-2000:]
    return {"events": events, **done}
