"""The errors of durable-agent and the failure types it reports.

Every error is a ``DurableAgentError`` (one tree to catch), and each says what to do next.
``Failure`` names every failure type an activity raises or a session fails with: the
workflow, the client and a person reading the Temporal UI tell failures apart by it."""

from __future__ import annotations

from enum import StrEnum


class DurableAgentError(Exception):
    """The root of durable-agent's errors: catch this to catch any of them."""


class NotRegistered(DurableAgentError, LookupError):
    """A name the worker's owner did not register; the message lists what is."""


class NotAllowed(DurableAgentError, PermissionError):
    """Something the spec carries that the worker's policy keeps from specs."""


class PayloadTooLarge(DurableAgentError, ValueError):
    """A payload over what Temporal takes (one message over the payload budget, or
    what a client would send, with no payload store); the message says what to do."""


class WakeUpRefused(DurableAgentError, ValueError):
    """A wake-up a session did not set or cancel: the message names the bound it passes
    (or the id it lacks) and what to do instead."""


# Every failure type durable-agent reports: the ``type`` of the ``ApplicationError`` an
# activity raises or a session fails with, which the workflow, the client and a person
# reading the Temporal UI tell failures apart by. One enum, so a type is never spelled
# twice.

class Failure(StrEnum):
    INVALID_INPUT = "InvalidInput"
    """A session's input (or a signal's) that cannot be read: the session fails at once."""
    NOT_ADMITTED = "NotAdmitted"
    """A spec asks for something its worker does not let sessions use; the message says
    what, field by field."""
    UNKNOWN_TOOL = "UnknownTool"
    """A spec names a tool (or a guardrail or hook) no worker of its queue has."""
    DUPLICATE_TOOL = "DuplicateTool"
    """Two of a session's tools would have one name."""
    MODEL_SETUP_UNKNOWN = "ModelSetupUnknown"
    """A model call whose worker lacks the session's model setup (it is sent again)."""
    TRANSCRIPT_UNKNOWN = "TranscriptUnknown"
    """A model call whose worker cannot find the array it refers to (it is sent again)."""
    TRANSCRIPT_MISMATCH = "TranscriptMismatch"
    """The array read back from the workers' store is not the one the session holds."""
    TOOL_RAISED = "ToolRaised"
    """A tool itself raised or overran its time: one of the tool's ``max_attempts`` (a
    lost worker is never reported this way: Temporal retries it)."""
    MODEL_ATTEMPT_FAILED = "ModelAttemptFailed"
    """A model attempt that failed in a way a later attempt may not (429, 5xx, transport,
    a broken stream): one of the model's ``max_attempts``."""
    PROVIDER_ERROR = "ProviderError"
    """A provider failure no later attempt can fix (a 4xx other than 408, 409 or 429)."""
    CONFIGURATION_ERROR = "ConfigurationError"
    """A failure no retry can fix (a key's variable unset, a wire API the worker lacks)."""
    HOOK_FAILED = "HookFailed"
    """A request or reply hook raised: the turn ends with its words."""
    CAPACITY_WAIT = "CapacityWait"
    """No capacity on the endpoint's shared limit: the session waits for the limiter's
    ``capacity_ready`` and calls again (no attempt used)."""
    GUARDRAIL_FAILED = "GuardrailFailed"
    """A guardrail raised (or is not loaded): retried, then the turn fails closed."""
    MCP_SERVER_UNAVAILABLE = "McpServerUnavailable"
    """An MCP server could not be started or reached when a session starts."""
    OPENAPI_UNUSABLE = "OpenApiUnusable"
    """An OpenAPI document cannot be read or used when a session starts."""
    TOOLSET_UNAVAILABLE = "ToolsetUnavailable"
    """A toolset's source is unknown to its kind, or cannot be listed, at start."""
    NO_CONVERSATION = "NoConversation"
    """A resumed or forked conversation that is not there (or not the caller's)."""
    DECISION_REFUSED = "DecisionRefused"
    """A decision an update refused; the message says why."""
