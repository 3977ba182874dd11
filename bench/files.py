"""A worker's memory under one request of many files by URL: a 1 KB message with 20
parts naming a 5 MB file on an origin the worker's owner registered, on Chat
Completions (where the worker fetches each file and sends it inline), for two turns.

    ./run bench-files [--parts 20] [--megabytes 5] [--origin served] [--distinct]

The worker (``durable-agent worker`` with a capabilities file, in its own process,
against a fresh dev server) fetches within ``FileLimits``: at most 10 files and 32 MB
a request by default. Its resident memory is read from ``/proc`` before the session
and at its peak after; the origin counts its requests and the bytes it served, per
model request, and the model server the bytes each request carried.

``--origin`` says how the origin answers, for what a request costs when its files
cannot be sent: ``missing`` (404 for each), ``unsized`` (the file streamed without a
``Content-Length``, the worker's ``max_file_bytes`` set to 1 MB below it), ``budget``
(each file of 200 KB fits ``max_file_bytes`` but not the session's context budget of
10,000 tokens). ``--distinct``: each part names a path of its own (the origin serves
the same file at every path), rather than all of them one.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from bench.gateway_body import memory_mb
from bench.run import ROOT, dev_server
from durable_agent import AgentClient, ModelSpec
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.context import ContextRules
from durable_agent._wire.messages import file_part_from_url, user_message
from durable_agent.testing import ScriptedProvider, assistant_text


@dataclass
class Origin:
    """What reached the origin: the status of each request, and the body bytes it wrote
    (those the socket took before the worker hung up)."""

    asked: list[str] = field(default_factory=list)
    served: int = 0

    def since(self, requests: int, served: int) -> str:
        return f"{len(self.asked) - requests} GETs, {(self.served - served) / 2**20:.1f} MB"


def origin(size: int, kind: str) -> tuple[http.server.ThreadingHTTPServer, Origin]:
    """One file of ``size`` bytes at every path, answered as ``kind`` says."""
    body = b"%PDF-1.4 " + b"x" * (size - 9)
    seen = Origin()

    class Files(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if kind == "missing":
                seen.asked.append("404")
                self.send_error(404)
                return
            conditional = self.headers.get("if-none-match") == '"v1"'
            seen.asked.append("304" if conditional else "200")
            self.send_response(304 if conditional else 200)
            self.send_header("ETag", '"v1"')
            if not conditional:
                self.send_header("Content-Type", "application/pdf")
                if kind != "unsized":  # without a length, the body ends when the socket does
                    self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if conditional:
                return
            try:
                for at in range(0, len(body), 64 * 1024):
                    chunk = body[at : at + 64 * 1024]
                    self.wfile.write(chunk)
                    seen.served += len(chunk)
            except OSError:  # the worker stopped reading and hung up
                return

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


async def main(parts: int, megabytes: int, kind: str, distinct: bool) -> None:
    size = 200 * 1024 if kind == "budget" else megabytes * 1024 * 1024
    files, seen = origin(size, kind)
    base = f"http://127.0.0.1:{files.server_address[1]}"
    limits = "file_limits = {max_file_bytes = 1048576}\n" if kind == "unsized" else ""
    context = ContextRules(budget_tokens=10_000) if kind == "budget" else ContextRules()
    script = [assistant_text("read"), assistant_text("read again")]
    with ScriptedProvider(script) as provider, tempfile.TemporaryDirectory() as data:
        capabilities = Path(data) / "capabilities.toml"
        capabilities.write_text(
            f'file_origins = ["{base}"]\n{limits}'
            f'[models.scripted]\nbase_url = "{provider.base_url}"\napi_key_env = ""\n'
        )
        async with dev_server() as (address, client):
            worker = subprocess.Popen(
                [
                    *(sys.executable, "-m", "durable_agent._cli.main", "worker"),
                    *("--address", address),
                    *("--task-queue", "files", "--capabilities", str(capabilities)),
                    *("--data-dir", data, "--log-level", "error"),
                ],
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert worker.stdout is not None
                while "ready" not in worker.stdout.readline():
                    if worker.poll() is not None:
                        raise RuntimeError("the worker did not start")
                agents = AgentClient(client, task_queue="files")
                model = ModelSpec(name="m", endpoint="scripted", context=context)
                spec = AgentSpec(model=model)
                before = memory_mb(worker.pid, "VmRSS")
                paths = [f"/big-{k}.pdf" if distinct else "/big.pdf" for k in range(parts)]
                urls = [file_part_from_url(base + path) for path in paths]
                message = user_message("read these", *urls)
                session = agents.session(await agents.start(spec, message))
                await session.wait(timeout=600)
                first = seen.since(0, 0)
                requests, served = len(seen.asked), seen.served
                cursor = await session.send("and again?")
                await session.wait(after=cursor, timeout=600)
                second = seen.since(requests, served)
                peak = memory_mb(worker.pid, "VmHWM")
            finally:
                worker.terminate()
                worker.wait(30)
    files.shutdown()
    sent = [len(json.dumps(r.body)) for r in provider.requests]
    inline = [
        sum(1 for p in r.body["messages"][-1 if k == 0 else 0]["content"] if p["type"] == "file")
        for k, r in enumerate(provider.requests)
    ]
    print(
        f"# A worker's memory under {parts} file parts of {size / 2**20:.2g} MB each, origin "
        f"{kind}{', each at its own path' if distinct else ''} ({date.today()}, "
        f"{platform.machine()}, {os.cpu_count()} cores)"
    )
    full, unchanged, missing = (seen.asked.count(status) for status in ("200", "304", "404"))
    print(f"origin requests: {full} full, {unchanged} not modified, {missing} not found")
    print(f"at the origin, first model request: {first}; the next: {second}")
    print(f"files inline per request: {inline}; request bodies: {[s // 2**20 for s in sent]} MB")
    print(f"worker resident before: {before:.0f} MB; peak: {peak:.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", type=int, default=20)
    parser.add_argument("--megabytes", type=int, default=5)
    kinds = ["served", "missing", "unsized", "budget"]
    parser.add_argument("--origin", choices=kinds, default="served")
    parser.add_argument("--distinct", action="store_true")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.parts, arguments.megabytes, arguments.origin, arguments.distinct))
