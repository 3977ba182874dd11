"""The handoff kind: a swarm's ``transfer_to_<agent>`` and ``transfer_back`` tools,
generated from the spec (``durable_agent.core._swarm``). The session carries them out itself
at the batch's end: no worker runs them."""

from __future__ import annotations

from ._base import CallTarget
from ._kind import ToolKind
from ._targets import HandoffTarget


class HandoffKind(ToolKind[HandoffTarget, CallTarget]):
    name = "handoff"
    target = HandoffTarget
    runs_in = "session"
