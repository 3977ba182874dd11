"""Testing agents: ``run_in_process`` runs an agent's loop in the test's own process (no
server, the worker's rules), ``AgentTestEnvironment`` end to end on a local Temporal
server and a worker; both against ``TestModel`` (answers from the tools' schemas) or
``FunctionModel`` (your function decides each reply); ``ScriptedProvider`` speaks a
provider's real wire over HTTP on 127.0.0.1; evals read cases and print a report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable_agent._contracts.evals import read_cases

from ._eval_report import report_table
from ._models import FunctionModel, ModelRequest, TestModel
from ._rerun import rerun
from ._scripted_provider import ScriptedProvider, assistant_calls, assistant_text, error_reply

if TYPE_CHECKING:
    from ._environment import AgentTestEnvironment, approve_all
    from ._in_process import run_in_process


def __getattr__(name: str) -> Any:
    # the environment brings a server and a worker, and an in-process run the worker's
    # parts: imported only when asked for
    if name in ("AgentTestEnvironment", "approve_all"):
        from ._environment import AgentTestEnvironment, approve_all

        return {"AgentTestEnvironment": AgentTestEnvironment, "approve_all": approve_all}[name]
    if name == "run_in_process":
        from ._in_process import run_in_process

        return run_in_process
    raise AttributeError(f"module 'durable_agent.testing' has no attribute {name!r}")


__all__ = [
    "AgentTestEnvironment",
    "FunctionModel",
    "ModelRequest",
    "ScriptedProvider",
    "TestModel",
    "approve_all",
    "assistant_calls",
    "assistant_text",
    "error_reply",
    "read_cases",
    "report_table",
    "rerun",
    "run_in_process",
]
