"""The official AG-UI client (npm ``@ag-ui/client``'s ``HttpAgent``), run by node from
``tests/clients/agui`` (``./run setup`` installs it): one ``runAgent`` per call, its
events in the order received, the messages and state the client ends with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.node_clients import CLIENTS, need_client, run_script

CLIENT = CLIENTS / "agui"


def need_agui_client() -> None:
    """Fail (not skip) when node or the client is missing: CI installs both."""
    need_client("agui", "@ag-ui/client")


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
    given = {"url": url, "threadId": thread_id, "messages": messages, **more}
    events, done = await run_script(CLIENT, "run.mjs", given, "event", on_event)
    return {"events": events, **done}
