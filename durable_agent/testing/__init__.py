"""Testing agents: ``run_in_process`` runs an agent's loop in the test's own process (no
server, the worker's rules), ``AgentTestEnvironment`` end to end on a local Temporal
server and a worker; both against ``TestModel`` (answers from the tools' schemas) or
``FunctionModel`` (your function decides each reply); ``ScriptedProvider`` speaks a
provider's real wire over HTTP on 127.0.0.1; evals read cases and print a report.

Its modules:

- ``_in_process``: ``run_in_process``: a session carried out in the test's process.
- ``_environment``: ``AgentTestEnvironment``: a local server and a worker, end to end.
- ``_models``: ``TestModel``, ``FunctionModel`` and a rate-limited model, over HTTP.
- ``_scripted_provider``: a scripted model server speaking a provider's wire.
- ``_rerun``: ``rerun``: a recorded conversation against today's agent code.
- ``_eval_report``: an evaluation's report as a table and an HTML page."""

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
