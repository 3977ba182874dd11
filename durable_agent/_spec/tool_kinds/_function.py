"""The function kind: a Python function a worker loaded (``@tool``), run by the worker's
own ``Registry``. Its tools are named in ``spec.tools`` and described by the
``resolve_tools`` activity; nothing but the name is needed to call one, so a function
call carries no call target."""

from __future__ import annotations

from typing import Any

from durable_agent._spec.tool_kinds._base import CallTarget, FunctionTarget
from durable_agent._spec.tool_kinds._kind import ToolKind


class FunctionKind(ToolKind[FunctionTarget, CallTarget]):
    """Run in the ``run_tool`` activity by the worker's registry (arguments validated
    against the function's signature, its effect check on a redelivery, its time
    limit), so it needs no ``run`` of its own."""

    name = "function"
    target = FunctionTarget

    def call_target(self, target: FunctionTarget, spec: Any) -> None:
        return None
