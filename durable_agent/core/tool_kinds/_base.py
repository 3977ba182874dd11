"""What every tool kind has in common.

A tool's kind decides how the tool is found when a session starts, what is recorded
about it (its ``ToolTarget``, kept with the tool in the session's state), what a call
of it needs besides its arguments (its ``CallTarget``), and where the call runs: on a
worker, as a child session, or in the session itself. Each kind is one module with its
target models and one ``ToolKind``; a worker has the kinds its ``Registry`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, cast

from pydantic import ConfigDict

from .._contract import Contract
from .._errors import DurableAgentError, NotRegistered
from .._failures import Failure
from .._tool_definition import ToolDefinition
from .._tool_policy import OwnerFloor
from .._tool_sources import ToolsetSpec

if TYPE_CHECKING:
    from .._spec import AgentSpec, ToolSource
    from .._tool_policy import ToolContext
    from ._recorded import ResolvedTool

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
            floor = OwnerFloor.of(tool.policy)
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
