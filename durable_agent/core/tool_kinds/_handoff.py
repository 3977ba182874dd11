"""The handoff kind: a swarm's ``transfer_to_<agent>`` and ``transfer_back`` tools,
generated from the spec (``durable_agent.core._swarm``). The session carries them out itself
at the batch's end: no worker runs them."""

from __future__ import annotations

from typing import Literal

from ._base import CallTarget, ToolKind, ToolTarget


class HandoffTarget(ToolTarget):
    kind: Literal["handoff"] = "handoff"
    to: str | None = None
    """The agent the conversation goes to; ``None``: back to the previous one."""


class HandoffKind(ToolKind[HandoffTarget, CallTarget]):
    name = "handoff"
    target = HandoffTarget
    runs_in = "session"
