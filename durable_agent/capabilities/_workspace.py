"""``Workspace``: a file tree per session (or shared by a namespace), kept outside the
message array, with the file tools of deepagents and a todo plan.

The files live in the memory store's own table, keyed by (namespace, normalised path);
the message array holds only the tool calls and their results. The worker's owner
registers sources as ``Memory`` does (a namespace template: ``"session/{session}"``
gives each session its own tree, ``"tenant/{tenant}/drafts"`` shares one between a
tenant's sessions, ``"session/{root}"`` a session and its sub-agents) and bounds their
size; a spec enables one by naming it in its ``toolsets``. A sub-agent reaches a
workspace only when its own spec names one. The
workflow's id stays the same across continue-as-new, so a session's tree does too.

A path is read as a path inside the tree, never as one on the worker's disk (nothing
here touches a disk): it is normalised to ``/a/b``, and one that climbs out (``..``),
holds a backslash, a NUL or another control or format character, or changes under
Unicode's compatibility normalisation (a full-width solidus) is refused.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from durable_agent._errors import NotRegistered
from durable_agent._spec.tool_kinds import ResolvedTool, ToolKind, ToolTarget, WorkerSide
from durable_agent._spec.tools import ToolContext, ToolPolicy, ToolsetSpec
from durable_agent._wire.messages import ToolDefinition

from ._memory import Memory, MemorySource, Scope
from ._memory_store import MemoryStore, PathRefused, Transaction, normalised

TODOS = "/todos.json"
@dataclass(frozen=True)
class WorkspaceLimits:
    """How large a workspace may grow; a write past a limit is refused with a sentence."""

    max_file_bytes: int = 1_000_000
    max_bytes: int = 20_000_000
    max_files: int = 1000


class WorkspaceTool(ToolTarget):
    kind: Literal["workspace"] = "workspace"
    source: str
    tool: str


def _schema(properties: dict[str, str], required: list[str]) -> dict[str, Any]:
    types = {"limit": "integer", "offset": "integer", "replace_all": "boolean"}
    return {
        "type": "object",
        "properties": {
            n: {"type": types.get(n, "string"), "description": d} for n, d in properties.items()
        },
        "required": required,
    }


_PATH = {"path": "A path in the workspace, e.g. /report/draft.md"}
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "ls": (
        "List the files under a folder of the workspace.",
        _schema({"path": "A folder (default /)"}, []),
    ),
    "read_file": (
        "Read a file of the workspace (lines from offset, at most limit).",
        _schema({**_PATH, "offset": "First line (from 0)", "limit": "Most lines"}, ["path"]),
    ),
    "write_file": (
        "Write a whole file (replacing it).",
        _schema({**_PATH, "content": "The file's text"}, ["path", "content"]),
    ),
    "edit_file": (
        "Replace text in a file: old_string must occur once, unless replace_all.",
        _schema(
            {
                **_PATH,
                "old_string": "Text to find",
                "new_string": "Its replacement",
                "replace_all": "Replace every occurrence",
            },
            ["path", "old_string", "new_string"],
        ),
    ),
    "delete": ("Delete a file.", _schema(_PATH, ["path"])),
    "glob": (
        "Paths that match a pattern, e.g. /notes/*.md.",
        _schema({"pattern": "A glob pattern"}, ["pattern"]),
    ),
    "grep": (
        "Lines that match a regular expression, in files whose paths match glob.",
        _schema(
            {"pattern": "A regular expression", "glob": "Which files (default all)"}, ["pattern"]
        ),
    ),
    "write_todos": (
        "Write the plan: the whole list of todos, each with its status.",
        {
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string"},
                            "status": {
                                "type": "string",
                                "enum": ["pending", "in_progress", "completed"],
                            },
                        },
                        "required": ["content", "status"],
                    },
                }
            },
            "required": ["todos"],
        },
    ),
}
WRITES = frozenset({"write_file", "edit_file", "delete", "write_todos"})


class Workspace(ToolKind[WorkspaceTool, WorkspaceTool]):
    """Workspace tools over ``store`` (a ``MemoryStore``, its URL, or a ``Memory`` whose
    store, tenants and owner lookups it shares), one toolset per source (name ->
    namespace template, or a ``MemorySource``), within ``limits``."""

    name = "workspace"
    target = WorkspaceTool

    def __init__(
        self,
        store: Memory | MemoryStore | str,
        sources: Mapping[str, str | MemorySource] | None = None,
        *,
        limits: WorkspaceLimits | None = None,
        tenants: Mapping[str, str] | None = None,
    ) -> None:
        chosen = sources if sources is not None else {"workspace": "session/{session}"}
        if isinstance(store, Memory):
            self.memory = Memory(store.store, chosen, tenants=tenants or store.tenants)
        else:
            self.memory = Memory(store, chosen, tenants=tenants)
        self.store = self.memory.store
        self.limits = limits or WorkspaceLimits()

    async def list_tools(self, source: ToolsetSpec, worker: WorkerSide) -> list[ResolvedTool]:
        if source.name not in self.memory.sources:
            known = ", ".join(sorted(self.memory.sources)) or "none"
            raise NotRegistered(
                f"no workspace {source.name!r} on this worker (workspaces: {known})"
            )
        return [
            ResolvedTool(
                definition=ToolDefinition(name=tool, description=about, parameters=schema),
                policy=ToolPolicy(max_attempts=3),
                target=WorkspaceTool(source=source.name, tool=tool),
            )
            for tool, (about, schema) in TOOLS.items()
        ]

    def where(self, call: WorkspaceTool) -> str:
        return f"workspace {call.source!r}"

    async def run(
        self,
        call: WorkspaceTool,
        arguments: dict[str, Any],
        context: ToolContext,
        worker: WorkerSide,
    ) -> tuple[str, bool]:
        return await self.serve(call, arguments, context, await self.memory.scope(context))

    async def serve(
        self, call: WorkspaceTool, arguments: dict[str, Any], context: ToolContext, scope: Scope
    ) -> tuple[str, bool]:
        """One call for ``scope``: the text the model reads, and whether it is an error."""
        if call.tool not in TOOLS:
            raise NotRegistered(f"workspace {call.source!r} has no tool {call.tool!r}")
        namespace = await self.memory.namespace(call.source, scope)
        try:
            if call.tool in WRITES:
                return await self._write(call.tool, namespace, arguments, scope, context)
            return await self._read(call.tool, namespace, arguments)
        except (PathRefused, KeyError, TypeError, re.error) as error:
            what = f"missing argument {error}" if isinstance(error, KeyError) else str(error)
            return f"{call.tool}: {what}", True

    async def _read(self, tool: str, namespace: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        if tool == "read_file":
            path = normalised(str(arguments["path"]))
            found = await self.store.read_file(namespace, path)
            if found is None:
                return f"read_file: no file {path}", True
            lines = found.content.splitlines()
            offset = int(arguments.get("offset") or 0)
            limit = int(arguments.get("limit") or 2000)
            return "\n".join(lines[offset : offset + limit]), False
        files = await self.store.files(namespace)
        if tool == "ls":
            folder = normalised(str(arguments.get("path") or "/")).rstrip("/") + "/"
            listed = [f"{f.path} ({f.size} bytes)" for f in files if f.path.startswith(folder)]
            return "\n".join(listed) or f"(no files under {folder})", False
        if tool == "glob":
            pattern = "/" + str(arguments["pattern"]).lstrip("/")
            return "\n".join(
                f.path for f in files if fnmatch.fnmatch(f.path, pattern)
            ) or "(none)", False
        expression = re.compile(str(arguments["pattern"]))
        which = "/" + str(arguments.get("glob") or "**").lstrip("/")
        hits = [
            f"{f.path}:{n + 1}: {line}"
            for f in files
            if fnmatch.fnmatch(f.path, which)
            for n, line in enumerate(f.content.splitlines())
            if expression.search(line)
        ]
        return "\n".join(hits[:200]) or "(no matches)", False

    async def _write(
        self,
        tool: str,
        namespace: str,
        arguments: dict[str, Any],
        scope: Scope,
        context: ToolContext,
    ) -> tuple[str, bool]:
        done = await self.store.answered(context.idempotency_key)
        if done is not None:  # a retry: the first run's answer, before anything is read
            return done.removeprefix("error: "), done.startswith("error: ")
        if tool == "write_todos":
            todos = arguments["todos"]
            if not isinstance(todos, list):
                raise TypeError("todos is a list")
            path, content = TODOS, json.dumps(todos, indent=1, ensure_ascii=False)
        else:
            path = normalised(str(arguments["path"]))
            content = str(arguments.get("content", ""))
        current = (
            None
            if tool in ("write_file", "write_todos")
            else await self.store.read_file(namespace, path)
        )
        if tool == "edit_file":
            if current is None:
                return f"edit_file: no file {path}", True
            old, new = str(arguments["old_string"]), str(arguments["new_string"])
            count = current.content.count(old)
            if count == 0 or (count > 1 and not arguments.get("replace_all")):
                found = "not found" if count == 0 else f"found {count} times (give replace_all)"
                return f"edit_file: old_string {found} in {path}", True
            content = current.content.replace(old, new)
        if tool == "delete" and current is None:
            return f"delete: no file {path}", True
        store, limits = self.store, self.limits

        async def write(tx: Transaction) -> str:
            if tool == "delete":
                await store.delete_file(tx, namespace, path)
                return f"Deleted {path}."
            size = len(content.encode())
            files, used = await store.usage(tx, namespace, path)
            if size > limits.max_file_bytes:
                most = limits.max_file_bytes
                return f"error: {path} would be {size} bytes; a file holds at most {most}"
            if used + size > limits.max_bytes:
                whole, most = used + size, limits.max_bytes
                return f"error: the workspace would hold {whole} bytes; it holds at most {most}"
            if files + 1 > limits.max_files:
                return (
                    f"error: the workspace holds {limits.max_files} files already; delete one first"
                )
            await store.write_file(tx, namespace, path, content, tenant=scope.tenant)
            return "Updated the plan." if tool == "write_todos" else f"Wrote {path} ({size} bytes)."

        answer = await store.once(context.idempotency_key, write)
        return answer.removeprefix("error: "), answer.startswith("error: ")
