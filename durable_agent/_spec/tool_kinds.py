"""Tool kinds: how a tool is found, recorded and run.

A kind is a ``ToolKind`` with its target models: how a tool of the kind is found when a
session starts, what is recorded about it (its ``ToolTarget``), what a call needs besides
its arguments (its ``CallTarget``), and where the call runs. This file holds what every
kind shares, the targets of the built-in kinds, the reading of tools recorded before kinds
existed, and one section per built-in kind (function, handoff, sub-agent, MCP, OpenAPI),
gathered in ``BUILT_IN_KINDS``. A worker runs the kinds its ``Registry`` holds
(``docs/how-to/extending.md`` builds one)."""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Generic, Literal, TypeVar, cast
from zoneinfo import ZoneInfo

from pydantic import (
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)

from durable_agent._errors import DurableAgentError, Failure, NotAllowed, NotRegistered
from durable_agent._spec.document import (
    AgentSpec,
    McpServerSpec,
    OpenApiSpec,
    ToolSource,
    parse_structured_output,
)
from durable_agent._spec.tools import OwnerGates, ToolPolicy, ToolsetSpec
from durable_agent._wire.messages import Contract, ToolDefinition

if TYPE_CHECKING:
    from durable_agent._spec.document import AgentSpec, ToolSource
    from durable_agent._spec.tools import ToolContext


# What every tool kind has in common. A ``ToolTarget`` is kept with its tool in the
# session's state; a call runs on a worker, as a child session, or in the session itself.

Placement = Literal["worker", "child_session", "session"]
"""Where a kind's calls run: a ``run_tool`` activity on a worker, a child session (a
sub-agent), or the session itself (a swarm's handoff)."""


class UnknownToolKind(DurableAgentError, ValueError):
    """A worker has no kind of this name; the message lists the ones it has."""


class ToolsetError(DurableAgentError, RuntimeError):
    """A toolset that cannot be listed (its source unknown here, or the kind failed):
    the session fails at once, naming it."""


class CallTarget(Contract):
    """What one call of a tool needs besides its arguments (the kind's ``call`` model,
    or its recorded target when that is all a call needs)."""

    kind: str


class ToolTarget(CallTarget):
    """What a tool stands for, recorded when the session starts (the kind's own model)."""


class OtherTarget(ToolTarget):
    """A target of a kind that is not built in, as the session and the client read it:
    every field kept as it came. The worker whose ``Registry`` has the kind reads it as
    the kind's own model before a call runs."""

    model_config = ConfigDict(extra="allow", frozen=True)


@dataclass
class WorkerSide:
    """What a worker lends a kind for one call or listing: its owner's registrations
    (``durable_agent.capabilities.Capabilities``: the kinds are below it, so it is not
    named here), and a place to keep what is worth reading once per worker."""

    capabilities: Any
    memo: dict[str, Any] = field(default_factory=dict)


class FunctionTarget(ToolTarget):
    """A function a worker loaded (the ``function`` kind): the tool's name says it all."""

    kind: Literal["function"] = "function"


# Tools and calls as sessions recorded them before tool kinds: one optional field per
# kind (``mcp``, ``http``, ``agent``, ``handoff``) instead of a ``target``. Histories and
# running sessions hold that shape forever, so it is read into the new one.

_RECORDED = {"mcp": "mcp", "http": "openapi", "agent": "agent", "handoff": "handoff"}
_CALLED = {"mcp": "mcp", "http": "openapi"}


def legacy_resolved_tool(data: Any) -> Any:
    """A recorded tool's old kind field as its ``target``."""
    if not isinstance(data, dict) or not _RECORDED.keys() & data.keys():
        return data
    data = dict(data)
    for key, kind in _RECORDED.items():
        value = data.pop(key, None)
        if value is None:
            continue
        if kind == "agent":
            data["target"] = {"kind": kind, "agent": value}
        else:
            data["target"] = {"kind": kind, **_as_dict(value)}
    return data


def legacy_tool_call(data: Any) -> Any:
    """A call's old ``mcp``/``http`` field as its ``target``."""
    if not isinstance(data, dict) or not _CALLED.keys() & data.keys():
        return data
    data = dict(data)
    for key, kind in _CALLED.items():
        value = data.pop(key, None)
        if value is not None:
            data["target"] = {"kind": kind, **_as_dict(value)}
    return data


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return dict(value.model_dump())  # a model given in Python, not JSON


# The targets of the built-in kinds, and tools as a session records them.
#
# A recorded target is read back by its ``kind`` field: as the built-in kind's own model,
# or, for any other kind, as an ``OtherTarget`` that keeps every field (the session and
# the client need nothing more; the worker whose ``Registry`` has the kind reads it as
# the kind's model before a call runs). So a session's state reads the same on every
# process, whatever kinds each has.

class McpTarget(ToolTarget):
    """Where an MCP tool lives: the spec's server, and the tool's own name there."""

    kind: Literal["mcp"] = "mcp"
    server: str
    tool: str


class McpCall(CallTarget):
    """An MCP tool call's server (its spec entry: small, and the worker needs it)."""

    kind: Literal["mcp"] = "mcp"
    server: McpServerSpec
    tool: str


class HttpOperation(ToolTarget):
    """How an OpenAPI operation is called: where each argument goes."""

    kind: Literal["openapi"] = "openapi"
    api: str
    """The service: the name of the spec's ``openapi`` entry."""
    method: str
    url: str
    """The full URL template (base URL and path), ``{name}`` for path parameters."""
    path: list[str] = Field(default_factory=list)
    query: list[str] = Field(default_factory=list)
    header: list[str] = Field(default_factory=list)
    body: bool = False
    """The ``body`` argument is sent as JSON."""
    operation_id: str | None = None
    """The operation's ``operationId`` in the document (the tool's name less the prefix
    the spec chose)."""


class HttpCall(CallTarget):
    """An OpenAPI tool call: the operation, the service's headers (variable names) and
    the operations the session's entry narrows the service to."""

    kind: Literal["openapi"] = "openapi"
    operation: HttpOperation
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = 60.0
    operations: list[str] | None = None


class SubAgentTarget(ToolTarget):
    kind: Literal["agent"] = "agent"
    agent: str
    """The spec's ``agents`` entry."""


class SubAgentCall(CallTarget):
    kind: Literal["agent"] = "agent"
    spec: AgentSpec
    """The child session's spec."""
    inputs: dict[str, Any] | None = None
    """The agent's input schema (unset: a ``task`` string)."""


class HandoffTarget(ToolTarget):
    kind: Literal["handoff"] = "handoff"
    to: str | None = None
    """The agent the conversation goes to; ``None``: back to the previous one."""


class WakeUpsTarget(ToolTarget):
    """One of the three wake-up tools (set, list, cancel), which the session carries out
    itself, with the bounds the worker's owner set when the session started: what the
    session holds to, whatever a spec or a model asks."""

    kind: Literal["wake_ups"] = "wake_ups"
    action: Literal["set", "list", "cancel"]
    max_per_session: int = 20
    min_interval_seconds: int = 60
    max_ahead_days: int = 366
    timezone: str = "UTC"
    """Where a call that names no zone reads its times: the zone the spec's toolset
    entry gives."""


#: The built-in kinds' recorded targets and call targets, by kind.
_TARGETS: dict[str, type[ToolTarget]] = {
    "function": FunctionTarget,
    "mcp": McpTarget,
    "openapi": HttpOperation,
    "agent": SubAgentTarget,
    "handoff": HandoffTarget,
    "wake_ups": WakeUpsTarget,
}
_CALLS: dict[str, type[CallTarget]] = {"mcp": McpCall, "openapi": HttpCall, "agent": SubAgentCall}


def _kind_of(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    if not isinstance(kind, str):
        raise ValueError("a tool target needs its 'kind'")
    return kind


def _as_its_target(value: Any, handler: ValidatorFunctionWrapHandler) -> ToolTarget:
    if isinstance(value, ToolTarget):
        return value
    return _TARGETS.get(_kind_of(value), OtherTarget).model_validate(value)


def _as_its_call(value: Any, handler: ValidatorFunctionWrapHandler) -> CallTarget:
    if isinstance(value, CallTarget):
        return value
    kind = _kind_of(value)
    return (_CALLS.get(kind) or _TARGETS.get(kind, OtherTarget)).model_validate(value)


RecordedTarget = Annotated[ToolTarget, SerializeAsAny(), WrapValidator(_as_its_target)]
"""A tool's target, read as its kind's model (every field of a kind not built in)."""
RecordedCall = Annotated[CallTarget, SerializeAsAny(), WrapValidator(_as_its_call)]
"""A call's target, read as its kind's call model."""


class ResolvedTool(Contract):
    """A tool as the session recorded it at start: replay never asks a worker again."""

    definition: ToolDefinition
    policy: ToolPolicy
    bind: dict[str, str] = Field(default_factory=dict)
    target: RecordedTarget = Field(default_factory=FunctionTarget)
    """What the tool stands for, by its kind (``durable_agent._spec.tool_kinds``)."""
    describes: bool = False
    """The tool describes its calls for the people who approve them (``describe``)."""
    floor: OwnerGates | None = None
    """How the worker's owner gates the tool, when it does: no session setting or rule
    makes it looser."""

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        return legacy_resolved_tool(data)


# ``ToolKind``: what one kind of tool is, and what its worker half does.

TargetT = TypeVar("TargetT", bound=ToolTarget)
CallT = TypeVar("CallT", bound=CallTarget)
"""The kind's call target: its ``call`` model, or ``TargetT`` when it sets none."""


class ToolKind(Generic[TargetT, CallT]):
    """One kind of tool. Subclasses set ``name`` and ``target``; kinds whose calls run
    on a worker implement ``run``; kinds whose tools a spec names by source (its
    ``toolsets``) implement ``list_tools``. (The built-in kinds also set ``call``, with
    ``call_target``, when a call needs more than the recorded target; ``source``, when
    their entries carry more than a ``ToolsetSpec``; and ``admit``, when a worker's
    owner registers their sources in its ``Capabilities``.)"""

    name: ClassVar[str]
    target: ClassVar[type[ToolTarget]]
    call: ClassVar[type[CallTarget] | None] = None
    runs_in: ClassVar[Placement] = "worker"
    unavailable: ClassVar[Failure] = Failure.TOOLSET_UNAVAILABLE
    """The failure type of a source that cannot be listed when a session starts."""

    def source_name(self, source: ToolSource) -> str:
        """How errors name one of its sources ("MCP server 'files'")."""
        return f"toolset {source.name!r} ({self.name})"

    async def admit(self, source: ToolSource, worker: WorkerSide) -> ToolSource:
        """The source a spec's entry stands for on this worker (a registered one, as the
        entry may narrow it, or the entry itself where the worker's policy allows);
        ``NotRegistered``/``NotAllowed`` otherwise. By default the entry: the kind
        decides which sources exist when it lists them."""
        return source

    async def tools(self, source: ToolSource, worker: WorkerSide) -> list[ResolvedTool]:
        """The tools one of its sources gives a session: listed (``list_tools``),
        narrowed to ``allowed_tools``, named with the source's prefix, and gated no
        looser than the kind listed them (the kind is the worker owner's code)."""
        assert isinstance(source, ToolsetSpec)
        try:
            listed = await self.list_tools(source, worker)
        except Exception as error:  # a kind is the owner's code: any failure names the source
            raise ToolsetError(f"{type(error).__name__}: {error}") from None
        strays = [t.definition.name for t in listed if not isinstance(t.target, self.target)]
        if strays:
            stray = strays[0]
            raise ToolsetError(f"kind {self.name!r} listed {stray!r} with another kind's target")
        names = {t.definition.name for t in listed}
        allowed = names if source.allowed_tools is None else set(source.allowed_tools)
        missing = sorted(allowed - names)
        if missing:
            raise ToolsetError(f"allowed_tools names tools it does not have: {', '.join(missing)}")
        tools = []
        for tool in listed:
            if tool.definition.name not in allowed:
                continue
            name = source.tool_prefix + tool.definition.name
            named = {**tool.definition.model_dump(), "name": name}
            try:
                definition = ToolDefinition.model_validate(named)
            except ValueError as error:
                raise ToolsetError(str(error)) from None
            floor = OwnerGates.of(tool.policy)
            tools.append(tool.model_copy(update={"definition": definition, "floor": floor}))
        return tools

    def call_target(self, target: TargetT, spec: AgentSpec) -> CallT | None:
        """What a call of this tool carries, from its recorded target and the session's
        spec (pure: the workflow asks this). By default the recorded target itself."""
        if self.call is not None:
            raise NotImplementedError(f"tool kind {self.name!r} sets call: it says how")
        return cast(CallT, target)

    def where(self, call: CallT) -> str:
        """How errors name the place a call went ("MCP server 'files'")."""
        return f"the {self.name} tool"

    async def identity(self, call: CallT, worker: WorkerSide) -> str | None:
        """What the call is, as the worker's owner names it when granting a secret
        (``SecretGrant.tools``): ``kind:source/tool``, from the worker's registries, never
        from a name a spec chose. ``None`` (the default): this kind's calls receive no
        secrets."""
        return None

    async def list_tools(self, source: ToolsetSpec, worker: WorkerSide) -> list[ResolvedTool]:
        """The tools of one of this kind's sources, by their own names, as they are now
        (on a worker, when a session starts). ``NotRegistered`` when the worker knows no
        such source."""
        raise NotRegistered(f"tool kind {self.name!r} has no sources a spec can name")

    async def run(
        self, call: CallT, arguments: dict[str, Any], context: ToolContext, worker: WorkerSide
    ) -> tuple[str, bool]:
        """Run one call on a worker: its text and whether it is an error result the
        model reads. ``NotAllowed``/``NotRegistered`` when the worker refuses it; any
        other exception is the tool's failure (one of its attempts)."""
        raise NotImplementedError(f"tool kind {self.name!r} does not run on a worker")


# The function kind: a Python function a worker loaded (``@tool``), run by the worker's
# own ``Registry``. Its tools are named in ``spec.tools`` and described by the
# ``resolve_tools`` activity; nothing but the name is needed to call one, so a function
# call carries no call target.

class FunctionKind(ToolKind[FunctionTarget, CallTarget]):
    """Run in the ``run_tool`` activity by the worker's registry (arguments validated
    against the function's signature, its effect check on a redelivery, its time
    limit), so it needs no ``run`` of its own."""

    name = "function"
    target = FunctionTarget

    def call_target(self, target: FunctionTarget, spec: Any) -> None:
        return None


# The handoff kind: a swarm's ``transfer_to_<agent>`` and ``transfer_back`` tools,
# generated from the spec (``durable_agent._session.toolbox``). The session carries
# them out itself at the batch's end: no worker runs them.

class HandoffKind(ToolKind[HandoffTarget, CallTarget]):
    name = "handoff"
    target = HandoffTarget
    runs_in = "session"


# The sub-agent kind: another agent of the spec (``spec.agents``) called as a tool, each
# call a child session whose final answer is the result. The call carries the agent's
# spec, its approval settings made at least as strict as the calling session's.

class SubAgentKind(ToolKind[SubAgentTarget, SubAgentCall]):
    name = "agent"
    target = SubAgentTarget
    call = SubAgentCall
    runs_in = "child_session"

    def call_target(self, target: SubAgentTarget, spec: AgentSpec) -> SubAgentCall:
        entry = next(a for a in spec.agents if a.name == target.agent)
        approvals = entry.spec.approvals.within(spec.approvals)  # never looser than the caller
        child = entry.spec.model_copy(update={"approvals": approvals})
        return SubAgentCall(spec=child, inputs=entry.inputs)


def child_message(arguments: str, inputs: dict[str, Any] | None) -> str | Refused | None:
    """The child session's message from a call's arguments: its ``task``, or with
    ``inputs`` the arguments as JSON once they match the schema (``Refused``: why not,
    for the model to read; ``None``: no usable task)."""
    if inputs is not None:
        parsed = parse_structured_output(arguments or "{}", inputs)
        if not parsed.ok:
            text = (parsed.error or "").replace("the answer", "the arguments")
            return Refused(f"the agent's inputs: {text}")
        return json.dumps(parsed.value, ensure_ascii=False, indent=2, sort_keys=True)
    try:
        task = json.loads(arguments or "{}").get("task")
    except (ValueError, AttributeError):
        return None
    return task if isinstance(task, str) and task.strip() else None


class Refused(str):
    """A reason the call's arguments cannot start the agent."""


# The MCP kind: a tool of an MCP server (a ``toolsets`` entry of kind ``mcp``).
# Its tools are listed once, when the session starts; a call carries the server's entry
# (which the worker checks against its registrations again) and the tool's own name
# there. The worker side (the ``mcp`` SDK) is ``durable_agent._tools.mcp_servers``.

class McpKind(ToolKind[McpTarget, McpCall]):
    name = "mcp"
    target = McpTarget
    call = McpCall
    unavailable = Failure.MCP_SERVER_UNAVAILABLE

    def call_target(self, target: McpTarget, spec: AgentSpec) -> McpCall:
        servers = [s for s in spec.sources("mcp") if isinstance(s, McpServerSpec)]
        server = next(s for s in servers if s.name == target.server)
        return McpCall(server=server, tool=target.tool)

    def source_name(self, source: ToolSource) -> str:
        return f"MCP server {source.name!r}"

    def where(self, call: McpCall) -> str:
        return f"MCP server {call.server.name!r}"


# The OpenAPI kind: an operation of an HTTP service (a ``toolsets`` entry of kind
# ``openapi``), one tool per ``operationId``. The document is read once, when the
# session starts (``durable_agent._tools.openapi`` turns it into tools); a call carries the
# operation and the service's header variables, and the worker finds the operation in
# the registered service's document again before it sends anything. The worker side (httpx) is
# ``durable_agent._tools.openapi``.

class OpenApiKind(ToolKind[HttpOperation, HttpCall]):
    name = "openapi"
    target = HttpOperation
    call = HttpCall
    unavailable = Failure.OPENAPI_UNUSABLE

    def call_target(self, target: HttpOperation, spec: AgentSpec) -> HttpCall:
        services = [a for a in spec.sources("openapi") if isinstance(a, OpenApiSpec)]
        api = next(a for a in services if a.name == target.api)
        return HttpCall(
            operation=target,
            headers=api.headers,
            timeout_seconds=api.timeout_seconds,
            operations=api.operations,
        )

    def where(self, call: HttpCall) -> str:
        return f"OpenAPI service {call.operation.api!r}"

    def source_name(self, source: ToolSource) -> str:
        return f"OpenAPI {source.name!r}"


# The wake-ups kind: three tools that let the model set, list and cancel wake-ups (a
# message the session gives itself later, once or repeating). The session carries their
# calls out itself, as data in its own state: no worker runs them, nothing outside the
# workflow changes, and a replay gives the same answers.
#
# A spec enables them per agent with a ``toolsets`` entry ``{"kind": "wake_ups", "name":
# "wake_ups"}``; the worker's owner bounds them (``WakeUpLimits``, in its
# ``Capabilities``), and the bounds are recorded with the tools when the session starts,
# so nothing a spec or a model sends can raise them.

#: The one source the kind knows: a spec's entry names it.
WAKE_UPS_SOURCE = "wake_ups"


@dataclass(frozen=True)
class WakeUpLimits:
    """How far a session's wake-ups may go on this worker. A request past a bound is
    refused with a sentence that names it (the model reads it as the tool's error, a
    starter gets ``WakeUpRefused``)."""

    max_per_session: int = 20
    """Wake-ups a session holds at once (a repeating one counts once)."""
    min_interval_seconds: int = 60
    """The shortest time between two firings of a repeating wake-up, and the shortest
    delay of a first one set by the model."""
    max_ahead_days: int = 366
    """How far ahead a wake-up may fall due."""

    def __post_init__(self) -> None:
        if self.max_per_session < 1 or self.min_interval_seconds < 1 or self.max_ahead_days < 1:
            raise ValueError("WakeUpLimits: every bound is a whole number of at least 1")


@cache
def _zone_names() -> frozenset[str]:
    """The zones the pinned ``tzdata`` package has: the only names a zone is read by."""
    listing = importlib.resources.files("tzdata").joinpath("zones").read_text()
    return frozenset(listing.split())


@cache
def zone(name: str) -> ZoneInfo:
    """The time zone ``name`` from the pinned ``tzdata`` package; ``ValueError`` when it
    has none of that name."""
    if name not in _zone_names():
        raise ValueError(f"unknown time zone {name!r}: give an IANA name such as Europe/Paris")
    folder = importlib.resources.files("tzdata.zoneinfo")
    with folder.joinpath(*name.split("/")).open("rb") as data:
        return ZoneInfo.from_file(data, key=name)


_WHEN = (
    "Give exactly one of: 'at' (an ISO 8601 date and time, with an offset or in "
    "'timezone'), 'after_seconds' (a delay from now), 'every_seconds' (repeat at this "
    "interval) or 'cron' (repeat on a five-field cron rule in 'timezone')."
)

def _tools(default_zone: str) -> dict[Literal["set", "list", "cancel"], tuple[str, dict[str, Any]]]:
    """The three tools, each a description and its parameters' schema; a time without a
    zone is read in ``default_zone``."""
    return {
        "set": (
            "Set a wake-up: at its time you receive its text as a message marked as a wake-up "
            "(not from the user) and act on it. " + _WHEN + " Returns its id.",
            {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "What you will read when it fires."},
                    "at": {"type": "string", "description": "e.g. 2026-12-08T09:00:00+01:00"},
                    "after_seconds": {"type": "number"},
                    "every_seconds": {"type": "integer"},
                    "cron": {"type": "string", "description": "e.g. '0 9 * * mon-fri'"},
                    "timezone": {
                        "type": "string",
                        "description": f"IANA name; default {default_zone}",
                    },
                },
                "required": ["text"],
            },
        ),
        "list": ("List the wake-ups set in this session, with their ids and due times.", {}),
        "cancel": (
            "Cancel a wake-up by its id: it never fires again.",
            {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        ),
    }


class WakeUpsKind(ToolKind[WakeUpsTarget, CallTarget]):
    name = "wake_ups"
    target = WakeUpsTarget
    runs_in = "session"

    async def list_tools(self, source: ToolsetSpec, worker: WorkerSide) -> list[ResolvedTool]:
        if source.name != WAKE_UPS_SOURCE:
            raise NotRegistered(f"the wake_ups kind has one source, named {WAKE_UPS_SOURCE!r}")
        limits = getattr(worker.capabilities, "wake_ups", None)
        if not isinstance(limits, WakeUpLimits):
            raise NotAllowed(
                "this worker offers no wake-ups: its owner sets "
                "Capabilities(wake_ups=WakeUpLimits(...)) to offer them"
            )
        default_zone = source.timezone or "UTC"
        try:
            zone(default_zone)
        except ValueError as error:
            raise NotAllowed(f"timezone: {error}") from None
        tools = []
        for action, (description, parameters) in _tools(default_zone).items():
            schema = parameters or {"type": "object", "properties": {}}
            target = WakeUpsTarget(
                action=action,
                max_per_session=limits.max_per_session,
                min_interval_seconds=limits.min_interval_seconds,
                max_ahead_days=limits.max_ahead_days,
                timezone=default_zone,
            )
            definition = ToolDefinition(name=action, description=description, parameters=schema)
            tools.append(ResolvedTool(definition=definition, policy=ToolPolicy(), target=target))
        return tools


# The built-in kinds, as every session knows them.

BUILT_IN_KINDS: Mapping[str, ToolKind[Any, Any]] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            FunctionKind(),
            McpKind(),
            OpenApiKind(),
            SubAgentKind(),
            HandoffKind(),
            WakeUpsKind(),
        )
    }
)
"""The kinds every session knows, by name (read-only). Their pure halves: the MCP and
OpenAPI kinds run on a worker through its ``Registry``'s own halves."""


class _OnAWorker(ToolKind[ToolTarget, CallTarget]):
    """Any kind not built in, as the session sees it: its calls run on a worker, and a
    call carries the recorded target as it is."""

    name = "(a worker's own kind)"
    target = OtherTarget


_ON_A_WORKER = _OnAWorker()


def session_kind(name: str) -> ToolKind[Any, Any]:
    """The kind the session carries a call of ``name`` out as: a built-in one, or a kind
    whose calls run on a worker (which has it, or refuses the call)."""
    return BUILT_IN_KINDS.get(name, _ON_A_WORKER)
