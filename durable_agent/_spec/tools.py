"""What the runtime knows of a tool besides its code: its policy (approval, execution
mode, time limit, retries, task queue), the floor its owner set, and the context a call
is made in. Pure data: the session records these, and the workflow reads them.

Also where a spec's tools of other kinds come from: its ``toolsets`` (MCP servers,
OpenAPI services, sources of a kind the workers have), each naming what the worker
registered."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    model_serializer,
    model_validator,
)

from durable_agent._errors import DurableAgentError
from durable_agent._spec import SpecModel as _Spec
from durable_agent._wire.messages import ApprovalDecision, Usage

ApprovalMode = Literal["never", "always", "predicate", "deny"]
#: How much an approval mode holds a call back: a session may move a tool its owner
#: gates only up this scale, never down.
APPROVAL_STRICTNESS: dict[ApprovalMode, int] = {"never": 0, "predicate": 1, "always": 2, "deny": 3}
ExecutionMode = Literal["parallel", "sequential"]
ApprovalPredicate = Callable[[dict[str, Any]], bool]
CallDescriber = Callable[[dict[str, Any]], str]
"""The validated arguments of a call waiting for a person -> a short readable summary."""
NamedPredicate = Callable[[str, dict[str, Any]], bool]
"""A rule's predicate (``@approval_predicate``): (tool name, arguments) -> matches."""
EscalationNotifier = Callable[..., Any]
"""Called with an ``EscalationNotice`` when calls wait for a second group; sync or async."""
EffectCheck = Callable[["ToolContext"], Any]
"""Given a call's context (its idempotency key), the call's result if its effect already
happened, else ``None``; sync or async."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the call it serves (inject by typing a parameter)."""

    session_id: str
    turn: int
    slot: int
    tool_call_id: str
    idempotency_key: str
    """``<session id>:<turn>:<slot>``: the same on every retry and after a worker crash,
    so a tool with side effects can deduplicate them."""
    attempt: int = 1
    """The tool's own attempt: 1 + the times this call raised or timed out before."""
    context: dict[str, Any] = field(default_factory=dict)
    """The values bound for this call from the session's ``context``."""
    redelivery: int = 0
    """Times this attempt was started again because the worker running it was lost
    (killed, cut off, shut down): its effect may already have happened."""
    resumed: Any = None
    """What an earlier attempt of this call, on a worker that was lost, kept with
    ``note`` (``None``: nothing): a tool that started something far away (a remote
    agent's task) picks it up there instead of starting it again."""
    _spent: list[Usage] = field(default_factory=list, repr=False, compare=False)
    _noted: list[Any] = field(default_factory=list, repr=False, compare=False)
    _keep: Callable[[Any], None] | None = field(default=None, repr=False, compare=False)

    def note(self, value: Any) -> None:
        """Keep a small JSON value for a later attempt of this call: it travels with the
        activity's heartbeats, which Temporal keeps when the worker is lost, and the
        next attempt reads it as ``resumed``."""
        self._noted[:] = [value]
        if self._keep is not None:
            self._keep(value)

    @property
    def noted(self) -> Any:
        """What ``note`` kept last (``None``: nothing)."""
        return self._noted[0] if self._noted else None

    def report_usage(self, usage: Usage) -> None:
        """Count model tokens this call spent (a tool that runs a sub-agent or asks a
        model itself) toward the session's usage and budget; kept on its result."""
        self._spent.append(usage)

    @property
    def usage(self) -> Usage | None:
        """Model tokens the tool reported spending, if it did."""
        if not self._spent:
            return None
        total = self._spent[0]
        for more in self._spent[1:]:
            total = total + more
        return total


class ToolPolicy(BaseModel):
    """How the runtime treats a tool; JSON so a session can record and override it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approval: ApprovalMode = "never"
    """``never``; ``always``; ``predicate`` (the tool's predicate over the validated
    arguments decides); ``deny`` (never runs: a per-session ban)."""
    deny_reason: str = "not allowed in this session"
    execution_mode: ExecutionMode = "parallel"
    timeout_seconds: float = Field(default=300.0, gt=0)
    """The tool's own limit per attempt, enforced by the activity (overrunning it is one
    of ``max_attempts``)."""
    max_attempts: int = Field(default=3, ge=1)
    """Attempts when the tool raises or overruns ``timeout_seconds`` (1: no retry). Bad
    arguments are never retried; a lost worker never uses one up."""
    initial_retry_seconds: float = Field(default=1.0, gt=0)
    task_queue: str | None = None
    """Run on another worker pool (a GPU box, a network zone); default: the session's."""
    approval_timeout_seconds: float | None = Field(default=None, gt=0)
    approval_timeout_decision: ApprovalDecision = "denied"
    max_result_chars: int = Field(default=100_000, ge=100)
    """Longer results are cut to this many characters with a marker saying so (the
    whole result is kept in the transcript store and named in the marker and the log)."""
    approvers: list[str] | None = None
    """Who may decide this tool's calls (unset: the session's ``approvals.approvers``).
    Naming them without an ``approval`` mode gates every call."""
    external_output: bool | None = None
    """The call's output comes from outside (a page, another system): the tool never
    runs on a worker; its calls wait until someone who may decide them commits the
    output (``respond``), or are denied. Only the tool's owner sets it (a session's
    settings have no such field)."""

    @model_validator(mode="before")
    @classmethod
    def _approvers_gate(cls, data: Any) -> Any:
        """Approvers named without an approval mode gate every call: who may decide is
        moot for a call nobody is asked about."""
        if isinstance(data, dict) and data.get("approvers") and "approval" not in data:
            return {**data, "approval": "always"}
        return data


class OwnerGates(BaseModel):
    """What the worker's owner set on a tool that gates its calls, kept with the tool:
    a session's settings and rules may make it stricter, never looser."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approval: ApprovalMode = "never"
    approvers: list[str] | None = None
    """Only these may decide its calls, and only with a signed decision."""
    external_output: bool | None = None
    """Its calls' output comes from outside (``ToolPolicy.external_output``)."""

    @classmethod
    def of(cls, policy: ToolPolicy) -> OwnerGates | None:
        """The floor a registered policy sets (``None``: the owner gates nothing)."""
        gates = policy.approval != "never" or policy.approvers is not None
        if not gates and not policy.external_output:
            return None
        return cls(
            approval=policy.approval,
            approvers=policy.approvers,
            external_output=policy.external_output,
        )


def stricter_settings(owner: ToolPolicy, asked: dict[str, Any]) -> dict[str, Any]:
    """The per-session settings ``asked`` over a tool whose owner gates it, keeping only
    what makes it stricter: a stricter approval mode, approvers among the owner's (names
    outside the owner's list count for nothing), a deadline that denies (one that
    approves only if the owner's does, never sooner)."""
    kept = dict(asked)
    mode = kept.get("approval")
    if mode is not None and APPROVAL_STRICTNESS[mode] < APPROVAL_STRICTNESS[owner.approval]:
        del kept["approval"]
    if owner.approvers is not None:  # a session may choose among the owner's approvers
        chosen = [n for n in kept.get("approvers") or () if n in owner.approvers]
        kept["approvers"] = chosen or owner.approvers
    if owner.approval_timeout_decision == "denied" and "approval_timeout_decision" in kept:
        kept["approval_timeout_decision"] = "denied"
    approves = kept.get("approval_timeout_decision", owner.approval_timeout_decision)
    sooner = kept.get("approval_timeout_seconds")
    if approves == "approved" and sooner is not None:
        floor = owner.approval_timeout_seconds
        if floor is None or sooner < floor:
            del kept["approval_timeout_seconds"]
    return kept


class ToolArgumentsError(DurableAgentError, ValueError):
    """The model's arguments could not be used; the text is shown to the model."""


# Where a spec's tools of other kinds come from: its ``toolsets``, each a source of one
# kind of tool, by name (an MCP server, an OpenAPI service, or a source of a kind the
# workers have). Each names what the worker registered (or, where the worker's policy
# allows, gives it whole); the worker decides at admission. A kind's entries are its own
# model: the built-in ``mcp`` and ``openapi`` kinds' are below, any other kind's is a
# ``ToolsetSpec``.

SOURCE_NAME = r"^[A-Za-z0-9_-]+$"


class _KindKept(_Spec):
    """An entry whose ``kind`` is written out even where defaults are left out: it is
    what a ``toolsets`` entry is read back by."""

    kind: str

    @model_serializer(mode="wrap")
    def _with_kind(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {"kind": self.kind, **data}


class McpServerSpec(_KindKept):
    """An MCP server whose tools the session may use. In a spec, usually just the
    ``name`` of a server the worker registered (the spec may narrow ``allowed_tools``,
    change ``prefix`` and make ``approval`` stricter). A server given whole is started
    over stdio (``command``) or reached over streamable HTTP (``url``): that is how a
    worker registers one, and a spec may do it only where the worker's policy allows
    (``SpecPolicy.inline_sources``). Its tool list is read once, at start."""

    kind: Literal["mcp"] = "mcp"
    name: str = Field(pattern=SOURCE_NAME)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    """Names of the worker's environment variables the server process gets."""
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP header -> the worker's environment variable that holds its value."""
    allowed_tools: list[str] | None = None
    """Only these of the server's tools (unset: all of them)."""
    prefix: str | None = None
    """Put before each tool name (default ``<name>_``, so two servers cannot collide)."""
    approval: ApprovalMode = "never"
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if self.command is not None and self.url is not None:
            raise ValueError(f"mcp server {self.name!r}: give command or url, not both")
        if self.command is None and self.url is None and (self.args or self.env or self.headers):
            raise ValueError(
                f"mcp server {self.name!r}: args, env and headers need a command or url"
            )
        return self

    @property
    def tool_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix

    @property
    def listing_seconds(self) -> float:
        return self.timeout_seconds

    def given_whole(self) -> bool:
        return self.command is not None or self.url is not None

    def check_registrable(self) -> None:
        if not self.given_whole():
            raise ValueError(f"registered MCP server {self.name!r}: give command or url")


class OpenApiSpec(_KindKept):
    """An HTTP service described by an OpenAPI 3.0/3.1 document: one tool per operation
    (named by its ``operationId``). The document is read once, when the session starts.
    In a spec, usually just the ``name`` of a service the worker registered (the spec
    may narrow ``operations``, change ``prefix`` and make ``approval`` stricter)."""

    kind: Literal["openapi"] = "openapi"
    name: str = Field(pattern=SOURCE_NAME)
    document: str | None = Field(default=None, min_length=1)
    """Where the document is: an ``http(s)://`` URL or a file path on the workers (JSON or
    YAML). Unset: the registered service of this name. A spec gives one only where the
    worker's policy allows (``SpecPolicy.inline_sources``, ``worker_files``)."""
    base_url: str | None = None
    """Where calls go (default: the document's first ``servers`` URL, resolved against
    the document's own URL)."""
    operations: list[str] | None = None
    """Only these ``operationId``s (unset: all of them)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP header -> the worker's environment variable that holds its value."""
    prefix: str = ""
    approval: ApprovalMode = "never"
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=3, ge=1)
    max_result_chars: int = Field(default=100_000, ge=100)

    @property
    def tool_prefix(self) -> str:
        return self.prefix

    @property
    def listing_seconds(self) -> float:
        return self.timeout_seconds

    def given_whole(self) -> bool:
        return self.document is not None

    def check_registrable(self) -> None:
        if not self.given_whole():
            raise ValueError(f"registered OpenAPI service {self.name!r}: give its document")


class ToolsetSpec(_Spec):
    """Tools of a kind the workers have (their ``Registry``), from one of that kind's
    sources, by name: the kind says which sources exist and what they hold, so a spec
    can only pick among what the worker's owner set up. Listed once, at start."""

    kind: str = Field(min_length=1)
    name: str = Field(pattern=SOURCE_NAME)
    """The source, as the kind knows it."""
    allowed_tools: list[str] | None = None
    """Only these of its tools, by their own names (unset: all of them)."""
    prefix: str | None = None
    """Put before each tool name (default ``<name>_``)."""
    timezone: str | None = None
    """For a kind that reads times (``wake_ups``): the IANA time zone a call that names
    none is read in (unset: UTC)."""

    @model_validator(mode="after")
    def _zone_for_times(self) -> ToolsetSpec:
        if self.timezone is not None and self.kind != "wake_ups":
            raise ValueError("timezone: only a wake_ups toolset reads times")
        return self

    @property
    def tool_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix

    @property
    def listing_seconds(self) -> float:
        return 60.0

    def given_whole(self) -> bool:
        return False

    def check_registrable(self) -> None:
        return None


def _entry_kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in ("mcp", "openapi") else "other"


Registrable = TypeVar("Registrable", McpServerSpec, OpenApiSpec)
"""A kind of source a worker's owner registers whole: an MCP server, an OpenAPI service."""

ToolSource = Annotated[
    Annotated[McpServerSpec, Tag("mcp")]
    | Annotated[OpenApiSpec, Tag("openapi")]
    | Annotated[ToolsetSpec, Tag("other")],
    Discriminator(_entry_kind),
]
"""One entry of a spec's ``toolsets``, read as its kind's model."""


def sources_from_old_fields(data: Any) -> Any:
    """A spec written with ``mcp_servers`` and ``openapi`` lists (every history recorded
    before toolsets holds that shape): their entries as ``toolsets`` of their kinds."""
    if not isinstance(data, dict) or not ({"mcp_servers", "openapi"} & data.keys()):
        return data
    data = dict(data)
    moved: list[Any] = []
    for key, kind in (("mcp_servers", "mcp"), ("openapi", "openapi")):
        for entry in data.pop(key, None) or []:
            if isinstance(entry, str):  # listed by name alone
                entry = {"name": entry}
            elif not isinstance(entry, dict):
                entry = entry.model_dump(exclude_unset=True)
            moved.append({**entry, "kind": kind})
    data["toolsets"] = [*moved, *(data.get("toolsets") or [])]
    return data


def narrowed(registered: Registrable, entry: Registrable) -> Registrable:
    """The source a worker's owner registered, with what a spec's entry naming it may
    choose: fewer tools (or operations), another prefix, a stricter approval. An entry
    that asks for more than the registered source has is ``ValueError``."""
    update: dict[str, object] = {}
    chosen = entry.model_fields_set
    if "prefix" in chosen:
        update["prefix"] = entry.prefix
    if "approval" in chosen and (
        APPROVAL_STRICTNESS[entry.approval] > APPROVAL_STRICTNESS[registered.approval]
    ):
        update["approval"] = entry.approval
    narrowing = "allowed_tools" if isinstance(entry, McpServerSpec) else "operations"
    wanted, own = getattr(entry, narrowing), getattr(registered, narrowing)
    if wanted is not None:
        beyond = sorted(set(wanted) - set(own)) if own is not None else []
        if beyond:
            raise ValueError(
                f"{registered.name!r}: {narrowing} {', '.join(beyond)} are not among those "
                f"this worker registered ({', '.join(own or [])})"
            )
        update[narrowing] = wanted
    return registered.model_copy(update=update)
