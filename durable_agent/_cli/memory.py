"""``durable-agent memory``: the owner lists, reads, searches, edits and deletes
memories, in the workers' store itself (``--store``, as the workers open it: SQLite in
the data folder by default, sealed with the codec keys when they are set) or through a
gateway (``--gateway``, as one of its users: only their tenant's namespaces)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from durable_agent.capabilities._memory_store import (
    MemoryStore,
    Transaction,
    default_memory_url,
    open_memory_store,
)

from .args import CommandError, codec_keys

ACTIONS = ("list", "search", "get", "put", "delete")


def add_memory_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    memory = command("memory", "list, read, search, edit and delete agents' memories", server=False)
    memory.add_argument("action", choices=ACTIONS)
    memory.add_argument("--namespace", help="the namespace (list: only this one)")
    memory.add_argument("--key", help="the memory's key (get, put, delete)")
    memory.add_argument("--text", help="put: the memory's text")
    memory.add_argument("--query", help="search: words to look for")
    memory.add_argument("--limit", type=int, default=100)
    env = os.environ.get
    memory.add_argument("--data-dir", default=env("DURABLE_AGENT_DATA", ".data"))
    memory.add_argument(
        "--store",
        default=env("DURABLE_AGENT_MEMORY_STORE"),
        help="sqlite:///path or postgresql://... (default: SQLite in --data-dir)",
    )
    memory.add_argument(
        "--codec-keys-env",
        default="DURABLE_AGENT_CODEC_KEYS",
        help="environment variable holding the codec keys the workers seal memories with",
    )
    memory.add_argument(
        "--gateway",
        help="go through this gateway (http://host:port) as the user whose bearer token "
        "DURABLE_AGENT_GATEWAY_TOKEN holds, instead of opening the store",
    )


def _needs(args: argparse.Namespace, *names: str) -> None:
    missing = [f"--{n}" for n in names if not getattr(args, n)]
    if missing:
        raise CommandError(f"memory {args.action}: give {', '.join(missing)}")


async def cmd_memory(args: argparse.Namespace, out: TextIO) -> int:
    _needs(args, *{"search": ("namespace", "query"), "list": ()}.get(args.action, ()))
    if args.action in ("get", "put", "delete"):
        _needs(args, "namespace", "key", *(("text",) if args.action == "put" else ()))
    found = await (_through_gateway(args) if args.gateway else _in_store(args))
    print(json.dumps(found, indent=2, ensure_ascii=False), file=out)
    return 0


async def _in_store(args: argparse.Namespace) -> Any:
    store = open_memory_store(
        args.store or default_memory_url(Path(args.data_dir)), codec_keys(args)
    )
    try:
        return await _act(store, args)
    finally:
        await store.close()


async def _act(store: MemoryStore, args: argparse.Namespace) -> Any:
    if args.action == "list":
        return [m.as_json() for m in await store.listed(args.namespace, limit=args.limit)]
    if args.action == "search":
        found = await store.search(args.namespace, args.query, args.limit)
        return [m.as_json() for m in found]
    if args.action == "get":
        memory = await store.get(args.namespace, args.key)
        if memory is None:
            raise CommandError(f"no memory {args.key!r} in {args.namespace!r}")
        return memory.as_json()
    holder = await store.tenant_of(args.namespace)
    if args.action == "put":
        if holder is None:
            raise CommandError(
                f"{args.namespace!r} holds no memories yet: its agents' first write names "
                "its tenant (or write it through a gateway, as one of its users)"
            )

        async def put(tx: Transaction) -> str:
            new = await store.put(tx, args.namespace, args.key, args.text, tenant=holder)
            return "created" if new else "updated"

        return {"memory": await store.once(None, put)}

    async def remove(tx: Transaction) -> str:
        return "deleted" if await store.remove(tx, args.namespace, args.key) else "absent"

    return {"memory": await store.once(None, remove)}


async def _through_gateway(args: argparse.Namespace) -> Any:
    import httpx

    token = os.environ.get("DURABLE_AGENT_GATEWAY_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    params = {
        k: v for k, v in (("namespace", args.namespace), ("key", args.key), ("q", args.query)) if v
    }
    path = {"list": "", "search": "/search"}.get(args.action, "/item")
    method = {"put": "PUT", "delete": "DELETE"}.get(args.action, "GET")
    body = None
    if method == "PUT":
        body = {"namespace": args.namespace, "key": args.key, "text": args.text}
        params = {}
    elif args.action == "list":
        params["limit"] = str(args.limit)
    async with httpx.AsyncClient(base_url=args.gateway, timeout=30) as client:
        response = await client.request(
            method, f"/api/memory{path}", params=params, json=body, headers=headers
        )
    if not response.is_success:
        raise CommandError(f"the gateway answered {response.status_code}: {response.text}")
    return response.json()
