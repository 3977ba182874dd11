"""The gateway's memory routes: the owner and their users read, search, edit and delete
memories, and read and download workspace files, from REST and the console, behind the
one owner check.

A caller reaches only the namespaces whose rows their tenant owns (the tenant the
worker's owner maps their principal to, as the ``Memory`` kind does); a namespace of
another tenant answers as if it were empty or absent, and is never changed. A gateway
without users (loopback only) and an admin see every tenant's. A gateway served
without a memory store answers 404 saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from durable_agent.capabilities._memory import Memory

from ._context import MAX_LIMIT, Body, GatewayContext, HttpError, int_param, json_errors, read_body


class MemoryEdit(Body):
    """A memory as the owner writes it (a new one, or one changed in place)."""

    namespace: str = Field(min_length=1, max_length=500)
    key: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=100_000)
    metadata: dict[str, Any] = Field(default_factory=dict)


def memory_routes(gateway: GatewayContext, memory: Memory | None) -> list[Route]:
    def served() -> Memory:
        if memory is None:
            raise HttpError(404, "this gateway serves no memory store: give serve --memory-store")
        return memory

    def tenant(request: Request) -> str | None:
        """The caller's tenant; ``None``: one who sees every tenant's memories."""
        principal = GatewayContext.principal_of(request)
        if gateway.sees_everything(principal):
            return None
        if principal is None:
            raise HttpError(401, "a bearer token is needed")
        return served().tenant_of(str(principal))

    async def reachable(request: Request, namespace: str) -> str:
        """``namespace``, when the caller's tenant owns it (404, as if absent, if not)."""
        own = tenant(request)
        holder = await served().store.tenant_of(namespace)
        if own is not None and holder != own:
            raise HttpError(404, f"no memories in namespace {namespace!r}", "namespace")
        return namespace

    def param(request: Request, name: str) -> str:
        value = request.query_params.get(name)
        if not value:
            raise HttpError(400, f"{name}: give it as a query parameter", name)
        return value

    async def listing(request: Request) -> Response:
        limit = int_param(request, "limit", 100, 1, MAX_LIMIT)
        namespace = request.query_params.get("namespace") or None
        if namespace is not None:
            await reachable(request, namespace)
        found = await served().store.listed(namespace, tenant(request), limit)
        return JSONResponse([m.as_json() for m in found])

    async def search(request: Request) -> Response:
        namespace = await reachable(request, param(request, "namespace"))
        limit = int_param(request, "limit", 10, 1, 50)
        found = await served().store.search(namespace, param(request, "q"), limit)
        return JSONResponse([m.as_json() for m in found])

    async def read(request: Request) -> Response:
        namespace = await reachable(request, param(request, "namespace"))
        found = await served().store.get(namespace, param(request, "key"))
        if found is None:
            raise HttpError(404, "no such memory", "key")
        return JSONResponse(found.as_json())

    async def write(request: Request) -> Response:
        body: MemoryEdit = await read_body(request, MemoryEdit)
        store = served().store
        holder = await store.tenant_of(body.namespace)
        own = tenant(request)
        if own is not None and holder not in (None, own):
            raise HttpError(404, f"no memories in namespace {body.namespace!r}", "namespace")
        owner = own if own is not None else holder
        if owner is None:
            raise HttpError(
                422, "a new namespace needs its tenant: write it as one of its users", "namespace"
            )

        async def put(tx: Any) -> str:
            new = await store.put(
                tx, body.namespace, body.key, body.text, tenant=owner, metadata=body.metadata
            )
            return "created" if new else "updated"

        return JSONResponse({"memory": await store.once(None, put)})

    async def delete(request: Request) -> Response:
        namespace = await reachable(request, param(request, "namespace"))
        key, store = param(request, "key"), served().store

        async def remove(tx: Any) -> str:
            return "deleted" if await store.remove(tx, namespace, key) else "absent"

        done = await store.once(None, remove)
        if done == "absent":
            raise HttpError(404, "no such memory", "key")
        return JSONResponse({"memory": done})

    async def files(request: Request) -> Response:
        namespace = await reachable(request, param(request, "namespace"))
        found = await served().store.files(namespace)
        listed = [{"path": f.path, "size": f.size, "updated_at": f.updated_at} for f in found]
        return JSONResponse(listed)

    async def download(request: Request) -> Response:
        namespace = await reachable(request, param(request, "namespace"))
        found = await served().store.read_file(namespace, param(request, "path"))
        if found is None:
            raise HttpError(404, "no such file", "path")
        name = found.path.rsplit("/", 1)[-1].replace('"', "") or "file"
        disposition = {"content-disposition": f'attachment; filename="{name}"'}
        return PlainTextResponse(found.content, headers=disposition)

    wrap: Callable[..., Any] = json_errors
    return [
        Route("/api/memory", wrap(listing), methods=["GET"]),
        Route("/api/memory/search", wrap(search), methods=["GET"]),
        Route("/api/memory/item", wrap(read), methods=["GET"]),
        Route("/api/memory/item", wrap(write), methods=["PUT"]),
        Route("/api/memory/item", wrap(delete), methods=["DELETE"]),
        Route("/api/workspace", wrap(files), methods=["GET"]),
        Route("/api/workspace/file", wrap(download), methods=["GET"]),
    ]
