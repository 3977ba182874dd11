"""The Temporal layer's own parts beside the workflows and activities: the worker and
its plugin, the connection, payload storage and encryption, the sandbox, replay checks
and versioned workers."""

from __future__ import annotations

from ._binary import temporal_binary
from ._connection import DEFAULT_ADDRESS, ServerSettings, ServerUnreachableError, connect_client
from ._heap import freeze_startup_heap
from ._in_workflow import (
    AgentRun,
    agent_session_id,
    run_agent,
    run_child_agent,
    start_child_agent,
)
from ._plugin import DRAIN_SECONDS, DurableAgentPlugin, calls_in_flight
from ._ports import PortTaken, claimable, free_port
from ._replay_gate import check_histories, recorded_histories, running_histories
from ._shutdown import Stopped, exit_without_teardown, stoppable
from ._versions import (
    DEFAULT_DEPLOYMENT,
    DEPLOYMENT_FIELD,
    VERSION_FIELD,
    label,
    split_label,
    versioned,
)
from ._worker import build_worker, load_tool_modules, start_dev_server

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_DEPLOYMENT",
    "DEPLOYMENT_FIELD",
    "DRAIN_SECONDS",
    "VERSION_FIELD",
    "AgentRun",
    "DurableAgentPlugin",
    "PortTaken",
    "ServerSettings",
    "ServerUnreachableError",
    "Stopped",
    "agent_session_id",
    "build_worker",
    "calls_in_flight",
    "check_histories",
    "claimable",
    "connect_client",
    "exit_without_teardown",
    "free_port",
    "freeze_startup_heap",
    "label",
    "load_tool_modules",
    "recorded_histories",
    "run_agent",
    "run_child_agent",
    "running_histories",
    "split_label",
    "start_child_agent",
    "start_dev_server",
    "stoppable",
    "temporal_binary",
    "versioned",
]
