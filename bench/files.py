"""A worker's memory under one request of many files by URL: a 1 KB message with 20
parts naming a 5 MB file on an origin the worker's owner registered, on Chat
Completions (where the worker fetches each file and sends it inline), for two turns.

    ./run bench-files [--parts 20] [--megabytes 5]

The worker (``durable-agent worker`` with a capabilities file, in its own process,
against a fresh dev server) fetches within ``FileLimits``: at most 10 files and 32 MB
a request by default. Its resident memory is read from ``/proc`` before the session
and at its peak after; the origin counts its requests and the model server the bytes
each request carried.
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
from datetime import date
from pathlib import Path
from typing import Any

from bench.gateway_body import memory_mb
from bench.run import ROOT, dev_server
from durable_agent import AgentClient, ModelSpec
from durable_agent._spec._spec import AgentSpec
from durable_agent._wire._messages import file_part_from_url, user_message
from durable_agent.testing import ScriptedProvider, assistant_text


def origin(size: int) -> tuple[http.server.ThreadingHTTPServer, list[str]]:
    """One file of ``size`` bytes at ``/big.pdf``, with an ETag; the requests it got."""
    body = b"%PDF-1.4 " + b"x" * (size - 9)
    asked: list[str] = []

    class Files(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            conditional = self.headers.get("if-none-match") == '"v1"'
            asked.append("304" if conditional else "200")
            self.send_response(304 if conditional else 200)
            self.send_header("ETag", '"v1"')
            if not conditional:
                self.send_header("Content-Type", "application/pdf")
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not conditional:
                self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, asked


async def main(parts: int, megabytes: int) -> None:
    files, asked = origin(megabytes * 1024 * 1024)
    base = f"http://127.0.0.1:{files.server_address[1]}"
    script = [assistant_text("read"), assistant_text("read again")]
    with ScriptedProvider(script) as provider, tempfile.TemporaryDirectory() as data:
        capabilities = Path(data) / "capabilities.toml"
        capabilities.write_text(
            f'file_origins = ["{base}"]\n'
            f'[models.scripted]\nbase_url = "{provider.base_url}"\napi_key_env = ""\n'
        )
        async with dev_server() as (address, client):
            worker = subprocess.Popen(
                [
                    *(sys.executable, "-m", "durable_agent._cli", "worker", "--address", address),
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
                spec = AgentSpec(model=ModelSpec(name="m", endpoint="scripted"))
                before = memory_mb(worker.pid, "VmRSS")
                url = f"{base}/big.pdf"
                message = user_message("read these", *[file_part_from_url(url)] * parts)
                session = agents.session(await agents.start(spec, message))
                await session.wait(timeout=600)
                cursor = await session.send("and again?")
                await session.wait(after=cursor, timeout=600)
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
        f"# A worker's memory under {parts} file parts of {megabytes} MB each "
        f"({date.today()}, {platform.machine()}, {os.cpu_count()} cores)"
    )
    print(f"origin requests: {asked.count('200')} full, {asked.count('304')} not modified")
    print(f"files inline per request: {inline}; request bodies: {[s // 2**20 for s in sent]} MB")
    print(f"worker resident before: {before:.0f} MB; peak: {peak:.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", type=int, default=20)
    parser.add_argument("--megabytes", type=int, default=5)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.parts, arguments.megabytes))
