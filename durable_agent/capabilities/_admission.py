"""Admission: a session's spec checked against its worker's registries at start.

Each problem names the field and what the worker has instead, so the starter can fix
the spec; none of the checks starts, reads or requests anything (a URL's host is
resolved, nothing is sent to it). Sub-agents' specs are checked with their parent's,
so a session never starts to find one of its children refused.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from durable_agent._errors import NotAllowed, NotRegistered
from durable_agent._spec.document import AgentSpec, ModelPrice, ModelSpec, ToolSettings
from durable_agent._spec.tool_kinds import UnknownToolKind, WorkerSide
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import built_by, hosted_by

from ._registry import Capabilities

_Found = TypeVar("_Found")


async def admission_problems(
    spec: AgentSpec,
    capabilities: Capabilities,
    own_queue: str,
    registry: Registry,
    where: str = "",
) -> list[str]:
    """Everything in ``spec`` the worker does not let it use (empty: admitted): its
    ``capabilities``, and the tool kinds and wire APIs its ``registry`` has."""
    problems: list[str] = []

    async def check(field: str, lookup: Awaitable[_Found]) -> _Found | None:
        try:
            return await lookup
        except (NotRegistered, NotAllowed) as error:
            problems.append(f"{where}{field}: {error}")
            return None

    models: list[tuple[str, ModelSpec]] = [("model.endpoint", spec.model)]
    tools: list[tuple[str, ToolSettings]] = [(f"tools[{t.name}]", t) for t in spec.tools]
    for agent in spec.swarm.agents if spec.swarm else []:
        if agent.model is not None:
            models.append((f"swarm.agents[{agent.name}].model.endpoint", agent.model))
        tools += [(f"swarm.agents[{agent.name}].tools[{t.name}]", t) for t in agent.tools]
    for field, model in list(models):
        base = field.removesuffix(".endpoint")
        models += [(f"{base}.fallbacks[{k}].endpoint", f) for k, f in enumerate(model.fallbacks)]
    cost_budget = spec.stop.max_cost_usd is not None
    for field, model in models:
        options = model.options
        if options.prompt_cache_key is not None or "prompt_cache_key" in options.extra:
            problems.append(
                f"{where}{field.removesuffix('.endpoint')}.options.prompt_cache_key: the "
                "worker derives each session's cache key with a secret of its own, so no "
                "session can name another's; remove it (prompt_cache turns caching on or off)"
            )
        endpoint = await check(field, capabilities.endpoint(model.endpoint))
        if endpoint is not None and endpoint.api not in registry.apis():
            problems.append(
                f"{where}{field}.api: this worker does not speak the wire API "
                f"{endpoint.api!r} (it speaks {', '.join(registry.apis())}; a codec for it "
                "is added to the worker's Registry)"
            )
        elif endpoint is not None:
            built = built_by(registry.codec(endpoint.api))
            extra = set(options.extra) - {"prompt_cache_key"}  # (said above)
            for problem in capabilities.option_problems(model.endpoint, extra, built):
                problems.append(f"{where}{field.removesuffix('.endpoint')}.options.{problem}")
            offered = hosted_by(registry.codec(endpoint.api))
            _, wrong = capabilities.hosted_tools_for(model.endpoint, options, offered)
            for problem in wrong:
                problems.append(f"{where}{field.removesuffix('.endpoint')}.options.{problem}")
        if cost_budget and model.price is None and model.name not in capabilities.prices:
            problems.append(
                f"{where}{field.removesuffix('.endpoint')}.price: stop.max_cost_usd needs a "
                f"price for {model.name!r} (model.price, or one the worker registers)"
            )
        writer = model.context.summary_model
        if cost_budget and writer not in (None, model.name, *capabilities.prices):
            problems.append(
                f"{where}{field.removesuffix('.endpoint')}.context.summary_model: "
                f"stop.max_cost_usd needs a price for {writer!r}, which writes the "
                "summaries (one the worker registers)"
            )
    worker = WorkerSide(capabilities)
    for toolset in spec.toolsets:
        try:
            kind = registry.kind(toolset.kind)
        except UnknownToolKind as error:
            problems.append(f"{where}toolsets[{toolset.name}]: {error}")
            continue
        await check(f"toolsets[{toolset.name}]", kind.admit(toolset, worker))
    for name in capabilities.unknown_secrets(spec.secrets):
        problems.append(
            f"{where}secrets: {name!r} is not registered on this worker "
            f"(registered: {', '.join(sorted(capabilities.secrets)) or 'none'})"
        )
    for field, settings in tools:
        queue = settings.task_queue
        if queue is not None and not capabilities.task_queue_allowed(queue, own_queue):
            problems.append(
                f"{where}{field}.task_queue: {queue!r} is not a task queue this worker "
                f"routes tools to (registered: "
                f"{', '.join(sorted(capabilities.task_queues)) or 'none'})"
            )
    for sub in spec.agents:
        problems += await admission_problems(
            sub.spec, capabilities, own_queue, registry, f"{where}agents[{sub.name}]."
        )
    return problems


def registered_prices(spec: AgentSpec, capabilities: Capabilities) -> dict[str, ModelPrice]:
    """The worker's prices of the models the spec names without one."""
    models = [spec.model, *(a.model for a in (spec.swarm.agents if spec.swarm else ()) if a.model)]
    models += [f for m in list(models) for f in m.fallbacks]
    prices = {
        m.name: capabilities.prices[m.name]
        for m in models
        if m.price is None and m.name in capabilities.prices
    }
    # the model that writes a context's summaries is billed at its own price
    writers = {m.context.summary_model for m in models if m.context.summary_model} - set(prices)
    return prices | {w: capabilities.prices[w] for w in writers if w in capabilities.prices}
