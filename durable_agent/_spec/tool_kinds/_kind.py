"""``ToolKind``: what one kind of tool is, and what its worker half does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from durable_agent._errors import NotRegistered
from durable_agent._failures import Failure
from durable_agent._spec._tool_policy import OwnerGates
from durable_agent._spec._tool_sources import ToolsetSpec
from durable_agent._spec.tool_kinds._base import (
    CallTarget,
    Placement,
    ToolsetError,
    ToolTarget,
    WorkerSide,
)
from durable_agent._spec.tool_kinds._targets import ResolvedTool
from durable_agent._wire._tool_definition import ToolDefinition

if TYPE_CHECKING:
    from durable_agent._spec._spec import AgentSpec, ToolSource
    from durable_agent._spec._tool_policy import ToolContext

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
