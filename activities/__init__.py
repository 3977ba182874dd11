"""Every side effect of a session: model calls over HTTP, tool execution, the checks a
run starts with, the transcript store.

This folder installs as ``durable_agent._activities``: ``durable_agent._activities.X`` is the
file ``activities/X.py``; inside, modules import each other relatively.

Its modules:

- ``model``: the model activity: one provider call per turn, streamed.
- ``live_deltas``: a model call's text and reasoning, streamed into the event log.
- ``limits``: asking an endpoint's limiter for capacity, and giving it back.
- ``files``: files by URL fetched for a model, and what the model server may fetch.
- ``tools``: tools resolved and run, and guardrails.
- ``approvals``: the gate's activities: predicates, descriptions, tokens, escalations.
- ``checks``: admission, and an evaluation's case scored.
- ``resumption``: a conversation read back from another run.
- ``transcript_store``: where workers keep transcripts.
- ``message_log``: the message logs a worker feeds.
- ``running``: what every activity shares: observation, heartbeats, draining."""

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
