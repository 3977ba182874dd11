"""The remote agents a test worker process registers (``durable-agent worker --tools
tests.support.a2a_remotes``): ``billing``, at the URL in ``A2A_REMOTE_URL``."""

from __future__ import annotations

import os

from durable_agent.capabilities import RemoteAgent, RemoteAgents

remote_agents = RemoteAgents(
    {"billing": RemoteAgent(url=os.environ.get("A2A_REMOTE_URL", "http://127.0.0.1:9"))}
)
