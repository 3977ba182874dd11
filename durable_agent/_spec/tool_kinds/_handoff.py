"""The handoff kind: a swarm's ``transfer_to_<agent>`` and ``transfer_back`` tools,
generated from the spec (``durable_agent._session._swarm_view``). The session carries
them out itself at the batch's end: no worker runs them."""

from __future__ import annotations

from durable_agent._spec.tool_kinds._base import CallTarget
from durable_agent._spec.tool_kinds._kind import ToolKind
from durable_agent._spec.tool_kinds._targets import HandoffTarget


class HandoffKind(ToolKind[HandoffTarget, CallTarget]):
    name = "handoff"
    target = HandoffTarget
    runs_in = "session"
