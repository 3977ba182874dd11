"""The Vercel AI SDK in node (npm ``ai``: its ``DefaultChatTransport`` and
``readUIMessageStream``), run from ``tests/clients/ai_sdk`` (``./run setup`` installs
it): one request per call, the chunks in the order received, the UI message the SDK
built from them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from tests.support.node_clients import CLIENTS, need_client, run_script

CLIENT = CLIENTS / "ai_sdk"


def need_ai_sdk() -> None:
    """Fail (not skip) when node or the package is missing: CI installs both."""
    need_client("ai_sdk", "ai")


async def chat_request(
    api: str,
    chat_id: str,
    messages: list[dict[str, Any]],
    on_chunk: Callable[[dict[str, Any]], None] | None = None,
    **more: Any,
) -> Any:
    """One request of the AI SDK's transport to ``api``: ``{chunks, message, error,
    status}`` (``on_chunk`` sees each chunk as it arrives; ``more``: ``headers``,
    ``trigger``, ``resume``: the transport's ``reconnectToStream`` instead of a send)."""
    need_ai_sdk()
    given = {"api": api, "chatId": chat_id, "messages": messages, **more}
    chunks, done = await run_script(CLIENT, "run.mjs", given, "chunk", on_chunk)
    return {"chunks": chunks, **done}


async def validated(messages: Any) -> dict[str, Any]:
    """The ``ai`` package's ``safeValidateUIMessages`` run on ``messages``: ``{success,
    data, error}``, ``data`` the list as the SDK parsed it (unknown fields dropped)."""
    need_ai_sdk()
    process = await asyncio.create_subprocess_exec(
        "node",
        str(CLIENT / "validate.mjs"),
        cwd=CLIENT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=2**24,
    )
    out, err = await asyncio.wait_for(process.communicate(json.dumps(messages).encode()), 120)
    assert process.returncode == 0, err.decode()[-2000:]
    found: dict[str, Any] = json.loads(out)
    return found


def user_message(ident: str, text: str) -> dict[str, Any]:
    return {"id": ident, "role": "user", "parts": [{"type": "text", "text": text}]}


def answered(message: dict[str, Any], approved: bool, reason: str | None = None) -> dict[str, Any]:
    """The assistant message as ``addToolApprovalResponse`` leaves it: each tool part
    waiting for approval now ``approval-responded``, with the answer."""
    parts = []
    for part in message["parts"]:
        if part.get("state") == "approval-requested":
            approval = {**part["approval"], "approved": approved}
            if reason is not None:
                approval["reason"] = reason
            part = {**part, "state": "approval-responded", "approval": approval}
        parts.append(part)
    return {**message, "parts": parts}
