"""The worker side: the plugin and a ready worker, a dev server for local runs, agents
run inside your own workflows (and the decisions their approvals take), and the message
sinks a worker's owner may add.

Its modules:

- ``_plugin``: ``DurableAgentPlugin``, the sandbox choice, agents from the owner's modules.
- ``_worker``: ``build_worker``, and the dev server for local runs.
- ``_in_workflow``: an agent run from inside your own workflow.
- ``_replay_gate``: histories replayed against the working tree before a deploy.
- ``_local``: free local ports, and the Temporal CLI binary.
- ``_process``: how a process stops, and its garbage collector kept quiet."""

from __future__ import annotations

from durable_agent._activities.message_log import JSONLMessageLog, MessageContext
from durable_agent._contracts.approvals import DecisionRequest, DecisionResult
from durable_agent._payloads.encryption import CodecKeys

from ._in_workflow import AgentRun, run_agent, run_child_agent, start_child_agent
from ._plugin import DurableAgentPlugin
from ._worker import build_worker, start_dev_server

__all__ = [
    "AgentRun",
    "CodecKeys",
    "DecisionRequest",
    "DecisionResult",
    "DurableAgentPlugin",
    "JSONLMessageLog",
    "MessageContext",
    "build_worker",
    "run_agent",
    "run_child_agent",
    "start_child_agent",
    "start_dev_server",
]
