"""Every side effect of a session: model calls over HTTP, tool execution, the checks a
run starts with, the transcript store.

Installed as ``durable_agent._activities``; inside, modules import each other
relatively."""

from __future__ import annotations

from .approvals import ApprovalActivities
from .checks import AdmissionActivities, EvalActivities
from .message_log import JSONLMessageLog, MessageContext, MessageSink
from .model import ModelActivities
from .resumption import ResumptionActivities
from .running import ObservingInterceptor
from .tools import ToolActivities
from .transcript_store import TranscriptStore, default_store_url, open_transcript_store

__all__ = [
    "AdmissionActivities",
    "ApprovalActivities",
    "EvalActivities",
    "JSONLMessageLog",
    "MessageContext",
    "MessageSink",
    "ModelActivities",
    "ObservingInterceptor",
    "ResumptionActivities",
    "ToolActivities",
    "TranscriptStore",
    "default_store_url",
    "open_transcript_store",
]
