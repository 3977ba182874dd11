"""The gateway's memory while a large body arrives: a 400 MB upload of no declared
size to the codec endpoint, by a user of the gateway.

    ./run bench-gateway-body [--megabytes 400]

The gateway (``durable-agent serve`` with users and codec keys, in its own process,
against a fresh dev server) counts a body against its limit as it arrives and stops
keeping it past 4 MB; its resident memory is read from ``/proc`` before the upload and
at its peak after. A gateway that read the whole body before checking its size would
grow by about the body's size (it reached 829 MB for 400 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path

import httpx

from bench.run import ROOT, dev_server
from durable_agent._payloads.encryption import CodecKeys
from durable_agent.temporal._local import free_port

TOKEN = "bench-token-0123456789abcdef"


def memory_mb(pid: int, field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (the peak) of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for {pid}")


async def _listening(http: httpx.AsyncClient) -> None:
    """Until the gateway answers (it says where it serves just before it binds)."""
    for _ in range(300):
        try:
            await http.get("/healthz")
            return
        except httpx.ConnectError:
            await asyncio.sleep(0.1)
    raise RuntimeError("the gateway did not start")


async def main(megabytes: int) -> None:
    async with dev_server() as (address, _):
        port = free_port()
        env = {
            **os.environ,
            "TEMPORAL_ADDRESS": address,
            "DURABLE_AGENT_GATEWAY_TOKENS": f"bench={TOKEN}",
            "DURABLE_AGENT_GATEWAY_ADMINS": "token:bench",
            "DURABLE_AGENT_CODEC_KEYS": CodecKeys.generate("k1"),
        }
        gateway = subprocess.Popen(
            [sys.executable, "-m", "durable_agent._cli.main", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert gateway.stdout is not None
            gateway.stdout.readline()  # it says where it serves once it is up
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, timeout=600) as http:
                await _listening(http)
                before = memory_mb(gateway.pid, "VmRSS")

                async def upload() -> AsyncIterator[bytes]:
                    for _ in range(megabytes * 16):
                        yield b" " * 65536

                started = time.monotonic()
                headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
                try:
                    status = str(
                        (
                            await http.post("/codec/decode", content=upload(), headers=headers)
                        ).status_code
                    )
                except httpx.HTTPError as error:
                    status = f"connection closed ({type(error).__name__})"
                seconds = time.monotonic() - started
                peak = memory_mb(gateway.pid, "VmHWM")
                after = memory_mb(gateway.pid, "VmRSS")
        finally:
            gateway.terminate()
            gateway.wait(10)
    print(
        f"# The gateway's memory around a {megabytes} MB upload ({date.today()}, "
        f"{platform.machine()}, {os.cpu_count()} cores)"
    )
    print(f"answer: {status} after {seconds:.1f} s")
    print(f"resident before: {before:.0f} MB; peak: {peak:.0f} MB; after: {after:.0f} MB")
    print(f"grew at most {peak - before:.0f} MB for a {megabytes} MB body")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=400)
    asyncio.run(main(parser.parse_args().megabytes))
