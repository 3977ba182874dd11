"""``Memory``: the tool kind that lets agents remember across sessions.

The worker's owner registers it on the worker's ``Registry`` with a store and its
sources, each a namespace template (``"tenant/{tenant}/user/{user}"``); a spec enables
it for an agent by naming a source in its ``toolsets``. The tools (``remember``,
``recall``, ``update``, ``forget``) run as activities: a write is idempotent by the
call's key, and what a read returned is the call's result, recorded in history, so a
replay never asks the store again.

A namespace is filled on the worker at every call, from what the session's owner
checks established: the session's owner (the principal the gateway authenticated, kept
in the workflow's memo), the tenant the worker's owner maps them to, the session's id,
the id of the session at the top of a sub-agent's (Temporal's record of the parent
workflows) and the source's name. Nothing a model, a spec or a request writes is part of it, and a
namespace already holding another tenant's rows is refused.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from durable_agent._errors import NotAllowed, NotRegistered
from durable_agent._payloads.encryption import CodecKeys
from durable_agent._spec.tool_kinds import ResolvedTool, ToolKind, ToolTarget, WorkerSide
from durable_agent._spec.tools import ToolContext, ToolPolicy, ToolsetSpec
from durable_agent._wire.messages import ToolDefinition

from ._memory_store import MemoryStore, Transaction, open_memory_store

#: What a namespace template may name; each is filled by the worker.
PLACES = frozenset({"tenant", "user", "session", "root", "source"})


class MemoryTool(ToolTarget):
    """One memory tool: the source (the owner's registration) and which tool."""

    kind: Literal["memory"] = "memory"
    source: str
    tool: str


@dataclass(frozen=True)
class Embeddings:
    """An OpenAI-compatible embeddings endpoint the worker's owner names
    (``POST {base_url}/embeddings``); its key is read from ``api_key_env`` on the
    worker at each call. Redirects are not followed: requests reach this host only."""

    base_url: str
    model: str
    api_key_env: str | None = None
    timeout_seconds: float = 30.0

    async def vector(self, text: str) -> list[float]:
        import httpx  # a worker without embeddings never loads it

        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx.AsyncClient(
            timeout=self.timeout_seconds, follow_redirects=False
        ) as client:
            response = await client.post(
                f"{self.base_url.rstrip('/')}/embeddings",
                json={"model": self.model, "input": [text]},
                headers=headers,
            )
        if not response.is_success:
            raise RuntimeError(f"the embeddings endpoint answered HTTP {response.status_code}")
        vector = response.json()["data"][0]["embedding"]
        return [float(x) for x in vector]


@dataclass(frozen=True)
class MemorySource:
    """One namespace template and its bounds."""

    namespace: str
    max_chars: int = 20_000
    """Longest text one memory holds; a longer one is refused with a sentence."""
    recall_limit: int = 5
    """Most memories one recall returns."""
    max_ttl_seconds: float | None = None
    """Longest time to live a call may set (``None``: any, or none)."""

    def __post_init__(self) -> None:
        named = {f for _, f, _, _ in string.Formatter().parse(self.namespace) if f is not None}
        strays = sorted(named - PLACES)
        if strays or not self.namespace.strip():
            raise ValueError(
                f"namespace template {self.namespace!r}: it may name only "
                f"{', '.join('{' + p + '}' for p in sorted(PLACES))} (not {', '.join(strays)})"
            )


def _escaped(value: str) -> str:
    """A filled value that cannot add a level to a namespace."""
    return value.replace("%", "%25").replace("/", "%2F")


@dataclass(frozen=True)
class Scope:
    """Who a call serves, as the worker established it."""

    user: str
    tenant: str
    session: str
    root: str = ""
    """The session whose sub-agent this one is, at the top (itself, when it is not one)."""

    def fill(self, template: str, source: str) -> str:
        values = {"user": self.user, "tenant": self.tenant, "session": self.session}
        values["root"] = self.root or self.session
        needed = {f for _, f, _, _ in string.Formatter().parse(template) if f}
        missing = [p for p in ("user", "tenant") if p in needed and not values[p]]
        if missing:
            raise NotAllowed(
                "this memory is kept per owner, and the session has none: start it through "
                "the gateway, or with owner=... from Python"
            )
        values = {name: _escaped(value) for name, value in values.items()}
        return template.format(**values, source=_escaped(source))


class _Remember(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1)
    metadata: dict[str, Any] = Field(default_factory=dict)
    ttl_seconds: float | None = Field(default=None, gt=0)


class _Recall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=2000)
    by_meaning: bool = False
    limit: int | None = Field(default=None, ge=1, le=50)


class _Forget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(min_length=1, max_length=200)


_KEY = {"type": "string", "description": "A short name for the memory, e.g. 'preferred_name'"}
_TTL = {"type": "number", "description": "Seconds until it is forgotten (optional)"}
_WRITE = {
    "type": "object",
    "properties": {
        "key": _KEY,
        "text": {"type": "string", "description": "What to remember"},
        "metadata": {"type": "object", "description": "Labels for the memory (optional)"},
        "ttl_seconds": _TTL,
    },
    "required": ["key", "text"],
}
_QUERY = {"type": "string", "description": "Words to look for"}
_LIMIT = {"type": "integer", "description": "Most memories to return (optional)"}
_MEANING = {"type": "boolean", "description": "Search by meaning rather than by words"}
_FORGET = {"type": "object", "properties": {"key": _KEY}, "required": ["key"]}
DESCRIPTIONS = {
    "remember": "Remember a fact across conversations, under a key (replaces that key).",
    "recall": "Look up remembered facts that match a query.",
    "update": "Change a remembered fact (the key must exist).",
    "forget": "Forget a remembered fact by its key.",
}
TOOLS = (*DESCRIPTIONS, "memory")
"""The four tools, and Anthropic's memory tool (``memory_20250818``) over the same
memories: list it without a prefix (``"prefix": ""``) so Claude finds it as ``memory``."""


class Memory(ToolKind[MemoryTool, MemoryTool]):
    """Memory tools over ``store`` (a ``MemoryStore``, or its URL: ``sqlite:///path``,
    ``postgresql://...``), one toolset per source (name -> namespace template, or a
    ``MemorySource``). ``tenants``: principal (``token:alice``) -> tenant (default: the
    principal itself); ``embeddings``: the endpoint recall by meaning uses (unset:
    keyword recall only); ``keys``: codec keys, when ``store`` is a URL (unset: those of
    ``DURABLE_AGENT_CODEC_KEYS``, as the worker reads them, if any)."""

    name = "memory"
    target = MemoryTool

    def __init__(
        self,
        store: MemoryStore | str,
        sources: Mapping[str, str | MemorySource],
        *,
        tenants: Mapping[str, str] | None = None,
        embeddings: Embeddings | None = None,
        keys: CodecKeys | None = None,
    ) -> None:
        if isinstance(store, str):
            store = open_memory_store(store, keys or CodecKeys.from_environment())
        self.store = store
        self.sources = {
            name: s if isinstance(s, MemorySource) else MemorySource(s)
            for name, s in sources.items()
        }
        self.tenants = dict(tenants or {})
        self.embeddings = embeddings
        self._owners: dict[str, tuple[str, str]] = {}

    def tenant_of(self, principal: str) -> str:
        return self.tenants.get(principal, principal)

    def source(self, name: str) -> MemorySource:
        found = self.sources.get(name)
        if found is None:
            known = ", ".join(sorted(self.sources)) or "none"
            raise NotRegistered(f"no memory {name!r} on this worker (memories: {known})")
        return found

    async def list_tools(self, source: ToolsetSpec, worker: WorkerSide) -> list[ResolvedTool]:
        self.source(source.name)
        asked: dict[str, Any] = {"query": _QUERY, "limit": _LIMIT}
        if self.embeddings is not None:
            asked["by_meaning"] = _MEANING
        recall = {"type": "object", "properties": asked, "required": ["query"]}
        from ._memory_files import DESCRIPTION, SCHEMA

        schemas = {"remember": _WRITE, "recall": recall, "update": _WRITE, "forget": _FORGET}
        schemas["memory"] = SCHEMA
        about = {**DESCRIPTIONS, "memory": DESCRIPTION}
        return [
            ResolvedTool(
                definition=ToolDefinition(
                    name=tool, description=about[tool], parameters=schemas[tool]
                ),
                policy=ToolPolicy(max_attempts=3),
                target=MemoryTool(source=source.name, tool=tool),
            )
            for tool in TOOLS
        ]

    def where(self, call: MemoryTool) -> str:
        return f"memory {call.source!r}"

    async def scope(self, context: ToolContext) -> Scope:
        """Who the call serves: the session's owner, read from its workflow's memo
        (what the gateway recorded when it started the session)."""
        from temporalio import activity  # the kind runs in an activity; tests give the owner

        info = activity.info()
        workflow_id = info.workflow_id or context.session_id
        run = f"{workflow_id}/{info.workflow_run_id}"  # a reused session id may change hands
        known = self._owners.get(run)
        if known is None:
            client = activity.client()
            handle = client.get_workflow_handle(workflow_id, run_id=info.workflow_run_id or None)
            described = await handle.describe()
            owner = str(await described.memo_value("owner", "", type_hint=str))
            root = workflow_id
            for _ in range(10):  # a sub-agent's session, up to the one that started them
                if not described.parent_id:
                    break
                root = described.parent_id
                described = await client.get_workflow_handle(root).describe()
            if len(self._owners) >= 10_000:  # kept for the sessions of the moment only
                self._owners.clear()
            known = self._owners[run] = (owner, root)
        owner, root = known
        tenant = self.tenant_of(owner) if owner else ""
        return Scope(user=owner, tenant=tenant, session=workflow_id, root=root)

    async def namespace(self, source: str, scope: Scope) -> str:
        """The namespace a call of ``source`` reaches; ``NotAllowed`` when it holds
        another tenant's rows."""
        namespace = scope.fill(self.source(source).namespace, source)
        return await self.namespace_of_tenant(namespace, scope.tenant)

    async def namespace_of_tenant(self, namespace: str, tenant: str) -> str:
        """``namespace``, when no other tenant's rows are in it (``NotAllowed``)."""
        holder = await self.store.tenant_of(namespace)
        if holder is not None and holder != tenant:
            raise NotAllowed("this namespace belongs to another tenant")
        return namespace

    async def run(
        self, call: MemoryTool, arguments: dict[str, Any], context: ToolContext, worker: WorkerSide
    ) -> tuple[str, bool]:
        return await self.serve(call, arguments, context, await self.scope(context))

    async def serve(
        self, call: MemoryTool, arguments: dict[str, Any], context: ToolContext, scope: Scope
    ) -> tuple[str, bool]:
        """One call for ``scope``: the text the model reads, and whether it is an error."""
        source = self.source(call.source)
        if call.tool not in TOOLS:
            raise NotRegistered(f"memory {call.source!r} has no tool {call.tool!r}")
        if call.tool == "recall":  # one transaction checks the namespace and searches
            namespace = scope.fill(source.namespace, call.source)
        else:
            namespace = await self.namespace(call.source, scope)
        if call.tool == "memory":
            from ._memory_files import run_command  # it reads paths as the workspace does

            key = context.idempotency_key
            return await run_command(self.store, namespace, scope.tenant, arguments, key)
        try:
            if call.tool == "recall":
                recall = _Recall.model_validate(arguments)
                return await self._recall(namespace, recall, source, scope.tenant)
            if call.tool == "forget":
                forget = _Forget.model_validate(arguments)
                return await self._forget(namespace, forget.key, context.idempotency_key)
            write = _Remember.model_validate(arguments)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "arguments"
            return f"Invalid arguments for {call.tool}: {where}: {first['msg']}", True
        return await self._write(call.tool, namespace, write, source, scope, context)

    async def _write(
        self,
        tool: str,
        namespace: str,
        write: _Remember,
        source: MemorySource,
        scope: Scope,
        context: ToolContext,
    ) -> tuple[str, bool]:
        if len(write.text) > source.max_chars:
            return (
                f"Not remembered: the text is {len(write.text)} characters, and this memory "
                f"keeps at most {source.max_chars}; shorten it",
                True,
            )
        ttl = write.ttl_seconds
        if ttl is not None and source.max_ttl_seconds is not None and ttl > source.max_ttl_seconds:
            return (
                f"Not remembered: ttl_seconds is at most {source.max_ttl_seconds:g} here",
                True,
            )
        vector = None if self.embeddings is None else await self.embeddings.vector(write.text)
        store = self.store

        async def put(tx: Transaction) -> str:
            if tool == "update" and not await store.exists(tx, namespace, write.key):
                return f"error: no memory {write.key!r} to update; remember it first"
            new = await store.put(
                tx,
                namespace,
                write.key,
                write.text,
                tenant=scope.tenant,
                metadata=write.metadata,
                ttl_seconds=ttl,
                embedding=vector,
            )
            return f"{'Remembered' if new else 'Updated'} {write.key!r}."

        answer = await store.once(context.idempotency_key, put)
        return answer.removeprefix("error: "), answer.startswith("error: ")

    async def _forget(self, namespace: str, key: str, write_key: str) -> tuple[str, bool]:
        store = self.store

        async def remove(tx: Transaction) -> str:
            gone = await store.remove(tx, namespace, key)
            return f"Forgot {key!r}." if gone else f"error: no memory {key!r} to forget"

        answer = await store.once(write_key, remove)
        return answer.removeprefix("error: "), answer.startswith("error: ")

    async def _recall(
        self, namespace: str, recall: _Recall, source: MemorySource, tenant: str
    ) -> tuple[str, bool]:
        limit = min(recall.limit or source.recall_limit, source.recall_limit)
        if recall.by_meaning:
            if self.embeddings is None:
                return "Search by meaning is not set up here: search by words instead", True
            namespace = await self.namespace_of_tenant(namespace, tenant)
            found = await self.store.nearest(
                namespace, await self.embeddings.vector(recall.query), limit
            )
        else:
            found = await self.store.search(namespace, recall.query, limit, tenant=tenant)
        memories = [
            {"key": m.key, "text": m.text, **({"metadata": m.metadata} if m.metadata else {})}
            for m in found
        ]
        return json.dumps({"memories": memories}, ensure_ascii=False), False
