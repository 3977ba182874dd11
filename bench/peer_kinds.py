"""The peers in the benchmark (``./run bench --peers``): the OpenAI Agents SDK with
Temporal's plugin and Pydantic AI's Temporal integration, each run as its documentation
shows, in an environment of their own (``bench/.peers-venv``, made from
``bench/peers/requirements.txt`` when missing or changed) so their pins never meet ours.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parent.parent
VENV = ROOT / "bench" / ".peers-venv"
REQUIREMENTS = ROOT / "bench" / "peers" / "requirements.txt"


@dataclass(frozen=True)
class Peer:
    kind: str
    title: str
    module: str
    """The peer's worker program (``python -m MODULE ADDRESS TASK_QUEUE BASE_URL``)."""
    workflow: str


PEERS = {
    p.kind: p
    for p in (
        Peer(
            "openai-agents",
            "OpenAI Agents SDK",
            "bench.peers.openai_agents_peer",
            "OpenAIAgentsBench",
        ),
        Peer("pydantic-ai", "Pydantic AI", "bench.peers.pydantic_ai_peer", "PydanticAIBench"),
    )
}


def peers_python() -> Path:
    """The peers' interpreter, their pinned packages installed."""
    python = VENV / "bin" / "python"
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]
    stamp = VENV / f".installed-{digest}"
    if not stamp.exists():
        print(f"installing the peers into {VENV.relative_to(ROOT)} ...", file=sys.stderr)
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)], check=True
        )
        for old in VENV.glob(".installed-*"):
            old.unlink()
        stamp.touch()
    return python


def worker_command(peer: Peer, address: str, task_queue: str, base_url: str) -> list[str]:
    return [str(peers_python()), "-m", peer.module, address, task_queue, base_url]


def versions() -> str:
    """What was measured: the peers' packages and their versions."""
    lines = [
        line.split("#")[0].strip()
        for line in REQUIREMENTS.read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    return ", ".join(lines)
