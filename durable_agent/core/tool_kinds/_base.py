"""What every tool kind has in common, and the registry that names them.

A tool's kind decides how the tool is found when a session starts, what is recorded
about it (its ``ToolTarget``, kept with the tool in the session's state), what a call
of it needs besides its arguments (its ``CallTarget``), and where the call runs: on a
worker, as a child session, or in the session itself. Each kind is one module with its
target models and one ``ToolKind``; one ``register_tool_kind`` line makes it known.

Targets are validated through the registry by their ``kind`` field, so a recorded
tool of any registered kind reads back as its own model (in the workflow too: this
module and the kinds' modules import nothing that does I/O until a worker runs a
call).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, cast

from pydantic import Field, ModelWrapValidatorHandler, SerializeAsAny, model_validator

from .._contract import Contract
from .._errors import NotRegistered
from .._tool_definition import ToolDefinition
from .._tool_policy import OwnerFloor, ToolPolicy
from ._legacy import legacy_resolved_tool

if TYPE_CHECKING:
    from .._spec import AgentSpec, ToolsetSpec
    from .._tool_policy import ToolContext

Placement = Literal["worker", "child_session", "session"]
"""Where a kind's calls run: a ``run_tool`` activity on a worker, a child session (a
sub-agent), or the session itself (a swarm's handoff)."""


class UnknownToolKind(ValueError):
    """A target names a kind nothing registered; the message lists the known ones."""


class CallTarget(Contract):
    """What one call of a tool needs besides its arguments (the kind's ``call`` model,
    or its recorded target when that is all a call needs)."""

    kind: str

    @model_validator(mode="wrap")
    @classmethod
    def _as_its_kind(cls, value: Any, handler: ModelWrapValidatorHandler[CallTarget]) -> CallTarget:
        if cls is not CallTarget or isinstance(value, CallTarget):
            return handler(value)
        kind = tool_kind(_kind_of(value))
        return (kind.call or kind.target).model_validate(value)


class ToolTarget(CallTarget):
    """What a tool stands for, recorded when the session starts (the kind's own model)."""

    @model_validator(mode="wrap")
    @classmethod
    def _as_its_kind(cls, value: Any, handler: ModelWrapValidatorHandler[ToolTarget]) -> ToolTarget:
        if cls is not ToolTarget or isinstance(value, ToolTarget):
            return handler(value)
        return tool_kind(_kind_of(value)).target.model_validate(value)


def _kind_of(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    if not isinstance(kind, str):
        raise ValueError("a tool target needs its 'kind'")
    return kind


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


class ResolvedTool(Contract):
    """A tool as the session recorded it at start: replay never asks a worker again."""

    definition: ToolDefinition
    policy: ToolPolicy
    bind: dict[str, str] = Field(default_factory=dict)
    target: SerializeAsAny[ToolTarget] = Field(default_factory=FunctionTarget)
    """What the tool stands for, by its kind (``durable_agent.core.tool_kinds``)."""
    describes: bool = False
    """The tool describes its calls for the people who approve them (``describe``)."""
    floor: OwnerFloor | None = None
    """How the worker's owner gates the tool, when it does: no session setting or rule
    makes it looser."""

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        return legacy_resolved_tool(data)


TargetT = TypeVar("TargetT", bound=ToolTarget)
CallT = TypeVar("CallT", bound=CallTarget)
"""The kind's call target: its ``call`` model, or ``TargetT`` when it sets none."""


class ToolKind(Generic[TargetT, CallT]):
    """One kind of tool. Subclasses set ``name`` and ``target``; kinds whose calls run
    on a worker implement ``run`` (and set ``call`` with ``call_target`` when a call
    needs more than the recorded target); kinds whose tools a spec names by source
    (``spec.toolsets``) implement ``list_tools``."""

    name: ClassVar[str]
    target: ClassVar[type[ToolTarget]]
    call: ClassVar[type[CallTarget] | None] = None
    runs_in: ClassVar[Placement] = "worker"

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
        """The tools of one of this kind's sources, as they are now (on a worker, when a
        session starts). ``NotRegistered`` when the worker knows no such source."""
        raise NotRegistered(f"tool kind {self.name!r} has no sources a spec can name")

    async def run(
        self, call: CallT, arguments: dict[str, Any], context: ToolContext, worker: WorkerSide
    ) -> tuple[str, bool]:
        """Run one call on a worker: its text and whether it is an error result the
        model reads. ``NotAllowed``/``NotRegistered`` when the worker refuses it; any
        other exception is the tool's failure (one of its attempts)."""
        raise NotImplementedError(f"tool kind {self.name!r} does not run on a worker")


_KINDS: dict[str, ToolKind[Any, Any]] = {}
_IN_WORKFLOW = {"agent", "handoff"}


def register_tool_kind(kind: ToolKind[Any, Any]) -> None:
    """Make a kind known to this process: its targets validate, its calls run, specs
    may name its sources. Registering a kind of the same class again replaces it (a
    worker configured anew); another kind under a taken name is refused. Only the
    built-in sub-agent and handoff kinds run anywhere but on a worker: the workflow
    carries those out itself."""
    if kind.runs_in != "worker" and kind.name not in _IN_WORKFLOW:
        raise ValueError(f"tool kind {kind.name!r}: a registered kind runs on a worker")
    known = _KINDS.get(kind.name)
    if known is not None and type(known).__qualname__ != type(kind).__qualname__:
        raise ValueError(f"tool kind {kind.name!r} is registered already")
    _KINDS[kind.name] = kind


def tool_kind(name: str) -> ToolKind[Any, Any]:
    """The registered kind of this name; ``UnknownToolKind`` lists the known ones."""
    found = _KINDS.get(name)
    if found is None:
        known = ", ".join(sorted(_KINDS))
        raise UnknownToolKind(f"unknown tool kind {name!r}: registered kinds are {known}")
    return found


def registered_kinds() -> list[str]:
    return sorted(_KINDS)
