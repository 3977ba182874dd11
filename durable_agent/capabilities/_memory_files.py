"""Anthropic's memory tool (``memory_20250818``) served from the memory store.

Claude sends commands on files under ``/memories`` (``view``, ``create``,
``str_replace``, ``insert``, ``delete``, ``rename``) and the client runs them. Here a
file is a memory: its path is the memory's key, in the namespace the worker fills for
the call, so the same store, namespaces, idempotency and encryption hold. On the
Anthropic wire the tool goes as ``{"type": "memory_20250818", "name": "memory"}``
(the codec reads ``NATIVE`` in its schema); on other wires it is a function tool with
the same arguments, which the same code runs.
"""

from __future__ import annotations

from typing import Any

from ._memory_store import MemoryStore, PathRefused, Transaction, normalised

ROOT = "/memories"
NATIVE = "x-durable-agent-native"
SCHEMA: dict[str, Any] = {
    "type": "object",
    NATIVE: "memory_20250818",
    "properties": {
        "command": {
            "type": "string",
            "enum": ["view", "create", "str_replace", "insert", "delete", "rename"],
        },
        "path": {"type": "string", "description": "A path under /memories"},
        "file_text": {"type": "string"},
        "old_str": {"type": "string"},
        "new_str": {"type": "string"},
        "insert_line": {"type": "integer"},
        "insert_text": {"type": "string"},
        "old_path": {"type": "string"},
        "new_path": {"type": "string"},
        "view_range": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["command"],
}
DESCRIPTION = "Files under /memories that persist across conversations."


def memory_path(value: Any) -> str:
    """A path under ``/memories``, normalised; ``PathRefused`` for any other."""
    path = normalised(str(value))
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise PathRefused(f"paths are under {ROOT}")
    return path


async def run_command(
    store: MemoryStore, namespace: str, tenant: str, arguments: dict[str, Any], write_key: str
) -> tuple[str, bool]:
    """One command of the memory tool: the text Claude reads, and whether it failed."""
    command = arguments.get("command")
    try:
        if command == "view":
            return await _view(
                store, namespace, memory_path(arguments.get("path", ROOT)), arguments
            )
        if command not in ("create", "str_replace", "insert", "delete", "rename"):
            return f"unknown command {command!r}", True
        paths = [
            memory_path(arguments[name])
            for name in (("old_path", "new_path") if command == "rename" else ("path",))
        ]
    except (PathRefused, KeyError) as error:
        return f"{command}: {error}", True

    async def write(tx: Transaction) -> str:
        path = paths[0]
        current = await store.read_in(tx, namespace, path)
        if command == "create":
            await store.put(tx, namespace, path, str(arguments.get("file_text", "")), tenant=tenant)
            return f"File created successfully at {path}"
        if current is None:
            return f"error: the path {path} does not exist"
        if command == "delete":
            await store.remove(tx, namespace, path)
            return f"Deleted {path}"
        if command == "rename":
            await store.remove(tx, namespace, path)
            await store.put(tx, namespace, paths[1], current, tenant=tenant)
            return f"Renamed {path} to {paths[1]}"
        if command == "str_replace":
            old, new = str(arguments.get("old_str", "")), str(arguments.get("new_str", ""))
            if current.count(old) != 1:
                return f"error: old_str must occur once in {path} (found {current.count(old)})"
            text = current.replace(old, new)
        else:
            lines = current.split("\n")
            at = max(0, min(int(arguments.get("insert_line", 0)), len(lines)))
            text = "\n".join([*lines[:at], str(arguments.get("insert_text", "")), *lines[at:]])
        await store.put(tx, namespace, path, text, tenant=tenant)
        return f"The memory file {path} has been edited"

    answer = await store.once(write_key, write)
    return answer.removeprefix("error: "), answer.startswith("error: ")


async def _view(
    store: MemoryStore, namespace: str, path: str, arguments: dict[str, Any]
) -> tuple[str, bool]:
    found = await store.get(namespace, path)
    if found is None:
        under = [m.key for m in await store.listed(namespace, limit=1000)]
        inside = sorted(k for k in under if k.startswith(path.rstrip("/") + "/"))
        if path != ROOT and not inside:
            return f"the path {path} does not exist", True
        return "\n".join([f"Directory: {path}", *(f"- {k}" for k in inside)]), False
    lines = found.text.split("\n")
    first, last = 1, len(lines)
    shown = arguments.get("view_range")
    if isinstance(shown, list) and len(shown) == 2:
        first, last = max(1, int(shown[0])), (len(lines) if int(shown[1]) == -1 else int(shown[1]))
    return "\n".join(
        f"{n:6d}\t{lines[n - 1]}" for n in range(first, min(last, len(lines)) + 1)
    ), False
