"""A spec's ``toolsets``: the tools of registered kinds' sources, listed when a session
starts. The kind lists a source's tools by their own names; here they are narrowed to
``allowed_tools`` and prefixed, as MCP servers' are, so every kind behaves alike."""

from __future__ import annotations

from durable_agent.core import ResolvedTool, ToolDefinition, ToolsetSpec
from durable_agent.core.tool_kinds import WorkerSide, tool_kind


class ToolsetError(RuntimeError):
    """A toolset that cannot be listed (its kind or source unknown here, or the kind
    failed): the session fails at once, naming it."""


async def toolset_tools(toolset: ToolsetSpec, worker: WorkerSide) -> list[ResolvedTool]:
    try:
        kind = tool_kind(toolset.kind)
        listed = await kind.list_tools(toolset, worker)
    except Exception as error:  # a kind is the owner's code: any failure names the toolset
        raise ToolsetError(f"{type(error).__name__}: {error}") from None
    strays = [t.definition.name for t in listed if not isinstance(t.target, kind.target)]
    if strays:
        raise ToolsetError(f"kind {kind.name!r} listed {strays[0]!r} with another kind's target")
    names = {t.definition.name for t in listed}
    allowed = names if toolset.allowed_tools is None else set(toolset.allowed_tools)
    missing = sorted(allowed - names)
    if missing:
        raise ToolsetError(f"allowed_tools names tools it does not have: {', '.join(missing)}")
    tools = []
    for tool in listed:
        if tool.definition.name not in allowed:
            continue
        named = {**tool.definition.model_dump(), "name": toolset.tool_prefix + tool.definition.name}
        try:
            definition = ToolDefinition.model_validate(named)
        except ValueError as error:
            raise ToolsetError(str(error)) from None
        tools.append(tool.model_copy(update={"definition": definition}))
    return tools
