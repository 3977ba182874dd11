"""The agent spec: plain JSON a person can write, validated at the session's start.

``AgentSpec`` and its parts (the model and its price, the session's rules, sub-agents, a
swarm) and what a session starts from (``AgentInput``, with a ``Resumption`` or a
``Fork``). Its structured final answer is here too: the schema, written as JSON Schema or
as a property list, and the answer read and checked against it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BeforeValidator, Field, field_validator, model_validator

from durable_agent._spec import SpecModel
from durable_agent._spec.approval_policy import ApprovalSettings
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._spec.secret_values import SECRET_NAME, references
from durable_agent._spec.tools import ApprovalMode, ExecutionMode, sources_from_old_fields
from durable_agent._spec.tools import McpServerSpec as McpServerSpec
from durable_agent._spec.tools import OpenApiSpec as OpenApiSpec
from durable_agent._spec.tools import ToolsetSpec as ToolsetSpec
from durable_agent._spec.tools import ToolSource as ToolSource
from durable_agent._wire.context import ContextRules
from durable_agent._wire.messages import (
    ApprovalDecision,
    Message,
    RescueStrategy,
    Usage,
    UserMessage,
)
from durable_agent._wire.options import ModelOptions, NamedToolChoice, ReasoningWire
from durable_agent._wire.outgoing import ModelInputs, refusal

# Reading a structured final answer: JSON parsed and checked against the spec's
# schema, the raw text always kept. Pure: the workflow calls it.

@dataclass(frozen=True)
class StructuredOutput:
    raw: str
    value: Any = None
    error: str | None = None
    """Why the text could not be used as the structured answer (``value`` is then ``None``)."""

    @property
    def ok(self) -> bool:
        return self.error is None


def check_output_schema(schema: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the problem when ``schema`` is not a usable JSON Schema."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        raise ValueError(f"not a valid JSON Schema: {error.message}") from None


def parse_structured_output(text: str, schema: dict[str, Any] | None = None) -> StructuredOutput:
    """Parse the model's answer as JSON and validate it against ``schema``; on failure
    report every reason (with where in the document) and keep the raw text."""
    try:
        value = json.loads(text)
    except ValueError as error:
        return StructuredOutput(raw=text, error=f"the answer is not valid JSON: {error}")
    if schema is None:
        return StructuredOutput(raw=text, value=value)
    problems = sorted(
        Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path)
    )
    if problems:
        reasons = "; ".join(
            f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in problems
        )
        return StructuredOutput(raw=text, error=f"the answer does not match the schema: {reasons}")
    return StructuredOutput(raw=text, value=value)


# Schemas written as property lists (``[{"name": ..., "kind": ..., "required": ...}]``,
# as agent files such as Prompty's write inputs and outputs), projected to JSON Schema.
#
# A spec's ``output_schema`` and a sub-agent's ``inputs`` take either form.

#: A property's ``kind`` and the JSON Schema type it is.
KIND_TO_TYPE = {
    "string": "string",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
}


def property_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """One property as JSON Schema: its type, description, enum, items and properties."""
    kind = prop.get("kind", "string")
    if kind not in KIND_TO_TYPE:
        known = ", ".join(KIND_TO_TYPE)
        raise ValueError(f"property {prop.get('name', '?')!r}: unknown kind {kind!r} ({known})")
    schema: dict[str, Any] = {"type": KIND_TO_TYPE[kind]}
    if prop.get("description"):
        schema["description"] = prop["description"]
    if prop.get("enumValues"):
        schema["enum"] = prop["enumValues"]
    if "items" in prop:
        schema["items"] = property_schema(prop["items"])
    if "properties" in prop:
        schema.update(schema_from_properties(prop["properties"]))
    return schema


def schema_from_properties(properties: list[dict[str, Any]]) -> dict[str, Any]:
    """A property list as a JSON Schema object (``required`` from each property's)."""
    missing = [i for i, p in enumerate(properties) if not isinstance(p, dict) or "name" not in p]
    if missing:
        raise ValueError(f"properties {missing}: each needs a name")
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {p["name"]: property_schema(p) for p in properties},
    }
    required = [p["name"] for p in properties if p.get("required")]
    if required:
        schema["required"] = required
    return schema


def schema_or_properties(value: Any) -> Any:
    """A schema as given, or a property list as its schema (for pydantic validators)."""
    return schema_from_properties(value) if isinstance(value, list) else value


class ModelPrice(SpecModel):
    """What the model costs, in US dollars per million tokens (for ``stop.max_cost_usd``)."""

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)
    cached_input_per_million: float | None = Field(default=None, ge=0)
    """Input tokens the provider served from its prompt cache (unset: the input price)."""
    cache_write_per_million: float | None = Field(default=None, ge=0)
    """Input tokens written to the provider's prompt cache (unset: the input price)."""
    per_hosted_call: dict[str, Annotated[float, Field(ge=0)]] | None = None
    """US dollars per call of a hosted tool, by the name its usage counts it under
    (``web_search``, ``file_search``, ``code_interpreter``, ``web_fetch``), as the
    provider bills each call besides its tokens (a tool not named: no charge)."""

    def cost_usd(self, usage: Usage) -> float:
        """What ``usage`` cost: cached reads and cache writes at their own prices, the
        rest of the input at the input price, the output at the output price, and each
        hosted tool call at its price."""
        cached, written = usage.cached_tokens or 0, usage.cache_write_tokens or 0
        fresh = max(0, usage.prompt_tokens - cached - written)
        cached_price = self.cached_input_per_million
        write_price = self.cache_write_per_million
        return (
            fresh * self.input_per_million
            + cached * (self.input_per_million if cached_price is None else cached_price)
            + written * (self.input_per_million if write_price is None else write_price)
            + usage.completion_tokens * self.output_per_million
        ) / 1_000_000 + sum(
            n * (self.per_hosted_call or {}).get(name, 0.0)
            for name, n in (usage.hosted_calls or {}).items()
        )


class ModelSpec(SpecModel):
    """Which model, where, and how to call it. Given as text, ``"ENDPOINT:MODEL"`` names
    the model on an endpoint the worker registered (``"openai:gpt-4o-mini"``)."""

    @model_validator(mode="before")
    @classmethod
    def _named(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        endpoint, colon, name = value.partition(":")
        if not (colon and endpoint.strip() and name.strip()):
            raise ValueError(
                f"a model given as text is 'ENDPOINT:MODEL', its endpoint one the worker "
                f"registered (as 'openai:gpt-4o-mini'), not {value!r}"
            )
        return {"name": name.strip(), "endpoint": endpoint.strip()}

    name: str = Field(min_length=1)
    """The provider's model id, e.g. ``gpt-4o``."""
    endpoint: ProviderEndpoint | str = Field(default_factory=ProviderEndpoint)
    """A model endpoint the worker registered, by name (``"openai"``), or one given
    here, which a worker takes only when it equals one it registered or its policy
    allows specs their own (``SpecPolicy.inline_endpoints``)."""
    options: ModelOptions = Field(default_factory=ModelOptions)
    reasoning: ReasoningWire = Field(default_factory=ReasoningWire)
    inputs: ModelInputs = Field(default_factory=ModelInputs)
    """What the model takes besides text, and how it is asked for structured output."""
    stream: bool = True
    """Stream the reply."""
    timeout_seconds: float = Field(default=600.0, gt=0)
    """Longest one attempt may take, stream included."""
    max_attempts: int = Field(default=5, ge=1)
    """Attempts for retryable provider failures (429, 5xx, transport, broken streams).
    A lost worker never uses one up: its call is retried elsewhere."""
    initial_retry_seconds: float = Field(default=1.0, gt=0)
    max_retry_seconds: float = Field(default=60.0, gt=0)
    context: ContextRules = Field(default_factory=ContextRules)
    """How much of the conversation one request holds (trimming or compaction)."""
    price: ModelPrice | None = None
    fallbacks: list[ModelSpec] = Field(default_factory=list)
    """Other models to try, in order, when this one fails in a way another may not (a
    rate limit, an overload, a 5xx, a timeout: once its ``max_attempts`` are spent).
    Each is its own model call, on its own endpoint and API; an authentication or a
    request error fails as it would without them."""

    @field_validator("fallbacks")
    @classmethod
    def _one_level(cls, value: list[ModelSpec]) -> list[ModelSpec]:
        if any(model.fallbacks for model in value):
            raise ValueError("fallbacks: a fallback model has no fallbacks of its own")
        return value

    def refuses(self, message: UserMessage) -> str | None:
        """Why the message is refused as it is sent (``inputs.unsupported: refuse``):
        parts this model, or the wire the spec names, does not take."""
        if self.inputs.unsupported != "refuse" or isinstance(message.content, str):
            return None
        # the codecs say what each wire carries; loaded here only, for a message with
        # parts a model may refuse (a client sending text never loads them)
        from durable_agent._wire.codecs import wire_takes

        wire = self.endpoint.api if isinstance(self.endpoint, ProviderEndpoint) else None
        return refusal(message, self.inputs, wire_takes(wire))


class HookNames(SpecModel):
    """The hooks a session's model calls go through (``AgentSpec.hooks``)."""

    request: list[str] = Field(default_factory=list)
    """Rewrite the messages each model call sends (in this order)."""
    reply: list[str] = Field(default_factory=list)
    """Rewrite each reply before it is recorded (in this order). The reply's text is
    then not streamed to live readers, who would see it before the rewrite."""

    def names(self) -> list[str]:
        return [*self.request, *self.reply]


class ToolSettings(SpecModel):
    """A tool the session may use, with per-session overrides of its policy."""

    name: str = Field(min_length=1)
    approval: ApprovalMode | None = None
    deny_reason: str | None = None
    execution_mode: ExecutionMode | None = None
    approval_timeout_seconds: float | None = Field(default=None, gt=0)
    approval_timeout_decision: ApprovalDecision | None = None
    task_queue: str | None = Field(default=None, min_length=1)
    """Run this tool's calls on another worker pool (one that has loaded the tool)."""
    max_result_chars: int | None = Field(default=None, ge=100)
    approvers: list[str] | None = None
    """Who may decide this tool's calls (replaces ``approvals.approvers`` for them)."""


class StopRules(SpecModel):
    max_turns: int = Field(default=25, ge=1)
    """Most model calls in one user turn; one more ends the turn (``max_turns``)."""
    end_session_on: list[Literal["max_turns", "model_error"]] = Field(default_factory=list)
    """What ends the whole session rather than the turn: a runaway turn (``max_turns``)
    or a model call that failed for good (``model_error``: a permanent 4xx, retries
    spent). By default each ends the turn, as a guardrail or a cancellation does, and
    the session waits for the next message; a one-shot session ends either way."""
    on_tools: list[str] = Field(default_factory=list)
    """Stop after running any of these tools (its result is the final answer)."""
    max_tool_calls_per_turn: int = Field(default=1000, ge=1)
    """Calls of one model turn that run; the rest get ``is_error`` results saying so,
    which the model reads (pairing stays whole)."""
    max_total_tokens: int | None = Field(default=None, ge=1)
    """The session's token budget (all runs, summaries included): once spent, the session
    stops with ``stop_reason`` ``budget`` before its next model call."""
    max_cost_usd: float | None = Field(default=None, gt=0)
    """The session's cost budget, by each model's price (``model.price``, or the one its
    worker registers; admission refuses a model nobody priced)."""
    on_truncated: Literal["continue", "fail", "accept"] = "continue"
    """An answer that stopped before it was complete (``finish_reason`` ``length`` or
    ``content_filter``): ``continue`` keeps it and asks the model to go on from where it
    stopped (a ``resque`` step, counted against ``rescue.max_attempts``); ``fail`` ends
    the turn (``stop_reason`` ``truncated``); ``accept`` takes it as the answer."""


class RescueRules(SpecModel):
    """What the loop does with a model turn it cannot use (tool-call JSON that cannot be
    parsed, a tool that does not exist, an empty answer, an answer that fails the output
    schema). Each step is recorded in the array as a ``resque`` message."""

    strategy: RescueStrategy = "correct"
    """``correct``: tell the model what was wrong and ask again (the turn's calls run as
    usual, unknown tools and broken arguments getting error results). ``flush``: start
    afresh from the system messages and the latest user message, and ask again.
    ``fail``: end the turn (a one-shot session fails with ``unusable_reply``)."""
    max_attempts: int = Field(default=2, ge=0)
    """Rescues per answer; one more unusable turn ends the turn as ``fail`` does."""
    unparsed_output: Literal["rescue", "raw"] = "rescue"
    """An answer that does not parse as the ``output_schema`` asks: ``rescue`` it as any
    unusable turn, or take it as it is (``raw``): the session answers, its
    ``structured_output`` the raw text and its ``error`` why it did not parse."""


class GuardrailRules(SpecModel):
    """Guardrails by name (``@guardrail`` functions the workers load), run as activities."""

    input: list[str] = Field(default_factory=list)
    """Run on each user message before the model sees it; a denial ends the turn and the
    message stays in the array, marked ``blocked`` (never sent)."""
    output: list[str] = Field(default_factory=list)
    """Run on each final answer; a denial ends the turn, the answer marked ``blocked``."""
    max_attempts: int = Field(default=3, ge=1)
    """Tries of a guardrail that raises (durable timers between); then the turn fails."""
    timeout_seconds: float = Field(default=60.0, gt=0)


class SessionRules(SpecModel):
    """How long a session lives and how it keeps its history small."""

    end_after_reply: bool = False
    """End the session at the first final answer (a one-shot run) instead of waiting,
    durably and for as long as it takes, for the next message."""
    idle_timeout_seconds: float | None = Field(default=None, gt=0)
    """End a session that has waited this long for a message (a durable timer)."""
    continue_as_new_after_events: int | None = Field(default=None, ge=20)
    """Continue-as-new at the next checkpoint once a run's history holds this many events.
    Unset: only when the Temporal server suggests it."""
    max_message_chars: int = Field(default=200_000, ge=1)
    """Longest user message ``send_message`` accepts, in characters of its text (a string,
    or its text parts; images and files do not count); longer ones are rejected, visibly."""
    heartbeat_timeout_seconds: float = Field(default=15.0, ge=1, le=600)
    """How soon a lost worker is noticed. Every activity heartbeats on a timer while it
    runs; one silent this long is retried on another worker (not counted as an
    attempt of the tool or the model)."""
    recovery_limit_seconds: float | None = Field(default=None, gt=0)
    """How long one call may keep being retried after lost workers (or a store that is
    away) before it fails. Unset: for as long as it takes."""
    max_concurrent_tool_calls: int = Field(default=100, ge=1, le=1000)
    """Calls of one batch running at once; the rest start as places free up (Temporal
    allows 2,000 pending activities per run)."""
    payload_budget_bytes: int = Field(default=1_500_000, ge=10_000, le=2_000_000)
    """Largest activity input or continue-as-new payload the workflow will schedule
    (Temporal refuses payloads over 2 MB). Bigger transcripts go to the workers' store
    in pieces first and travel by reference."""
    upgrade: Literal["auto", "pinned"] = "auto"
    """When the workers' owner makes a new build current (worker deployments): ``auto``
    moves the session to it at its next turn boundary, by continue-as-new (the new build
    never replays the old one's history); ``pinned`` keeps it on the build that started
    it until a person moves it (``durable-agent versions move``)."""
    live_deltas: bool = True
    """Publish the model's text and reasoning to the session's event log as they stream
    (each batch, at most one per 80 ms, is a signal kept in history). Off: readers see a
    reply when it is whole; every other event is published either way, at no history
    cost."""


class SubAgentSpec(SpecModel):
    """Another agent as a tool: each call runs it as a child
    session (a child workflow) with the call's ``task`` (or its ``inputs``) as its
    message; its final answer is the tool's result."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str = Field(min_length=1)
    spec: AgentSpec
    """The agent's own spec (it runs one reply: ``end_after_reply`` is set for it)."""
    approval: ApprovalMode = "never"
    inputs: Annotated[dict[str, Any] | None, BeforeValidator(schema_or_properties)] = None
    """The agent's inputs as a JSON Schema object (or a property list,
    ``schema_from_properties``), projected as the tool's parameters
    (an agent with typed inputs); a call's arguments, checked against it, are the child's
    message as JSON. Unset: one ``task`` string, which is the message."""

    @field_validator("inputs")
    @classmethod
    def _object_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_output_schema(value)
            if value.get("type") != "object":
                raise ValueError('inputs: a JSON Schema with "type": "object"')
        return value


def _tool_shorthand(value: Any) -> Any:
    """A tool (or a registered server or service) may be listed by name alone:
    ``"get_weather"`` is ``{"name": "get_weather"}``."""
    if isinstance(value, list):
        return [{"name": v} if isinstance(v, str) else v for v in value]
    return value


ToolList = Annotated[list[ToolSettings], BeforeValidator(_tool_shorthand)]


AGENT_NAME = r"^[A-Za-z0-9_-]{1,52}$"
"""An agent's name: it becomes part of a tool name (``transfer_to_<name>``, 64 at most)."""


class SwarmAgentSpec(SpecModel):
    """One agent of a swarm: its own system prompt, model, tools and policies.
    The conversation moves between agents by handoff; every message records its agent."""

    name: str = Field(pattern=AGENT_NAME)
    description: str = ""
    """What the agent does: the description of the tool that hands over to it."""
    instructions: str | None = None
    """The agent's system prompt (other agents' prompts are never sent with it)."""
    model: ModelSpec | None = None
    """The agent's model, endpoint and options (unset: the session's ``model``)."""
    tools: ToolList = Field(default_factory=list)
    """The agent's own tools with its policy overrides (the spec's top-level ``tools``,
    MCP, OpenAPI and sub-agent tools are every agent's)."""
    tool_execution: ExecutionMode | None = None
    """Unset: the session's ``tool_execution``."""
    handoffs: list[str] | None = None
    """Agents it may hand the conversation to (unset: every other agent)."""
    handoff_approval: ApprovalMode = "never"
    """Whether handing the conversation to this agent waits for a person (``always``) or
    is refused (``deny``): the ``transfer_to_<name>`` call is gated like any tool call."""

    @field_validator("handoff_approval")
    @classmethod
    def _no_predicate(cls, value: ApprovalMode) -> ApprovalMode:
        if value == "predicate":
            raise ValueError("a handoff has no predicate: never, always or deny")
        return value


class SwarmSpec(SpecModel):
    """Several agents in one session, one of them active at a time."""

    agents: list[SwarmAgentSpec] = Field(min_length=1)
    default_agent: str | None = None
    """The agent a session starts with, the root of the navigation stack (unset: the
    first of ``agents``)."""

    @model_validator(mode="after")
    def _known_names(self) -> SwarmSpec:
        names = [a.name for a in self.agents]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"swarm.agents: {twice[0]!r} is the name of two agents")
        if self.default_agent is not None and self.default_agent not in names:
            raise ValueError(
                f"swarm.default_agent: {self.default_agent!r} is not among swarm.agents "
                f"({', '.join(names)})"
            )
        for agent in self.agents:
            for target in agent.handoffs or []:
                if target not in names:
                    raise ValueError(
                        f"swarm.agents[{agent.name}].handoffs: {target!r} is not among swarm.agents"
                    )
                if target == agent.name:
                    raise ValueError(
                        f"swarm.agents[{agent.name}].handoffs: an agent cannot hand over to itself"
                    )
        return self

    @property
    def default(self) -> str:
        return self.default_agent or self.agents[0].name

    def agent(self, name: str) -> SwarmAgentSpec:
        return next(a for a in self.agents if a.name == name)


class AgentSpec(SpecModel):
    model: ModelSpec
    instructions: str | None = None
    """The system prompt."""
    tools: ToolList = Field(default_factory=list)
    tool_execution: ExecutionMode = "parallel"
    context: dict[str, Any] = Field(default_factory=dict)
    """Values tools can be bound to (``@tool(bind={"unit": "preferred_unit"})``); never
    shown to the model. Not a place for secrets: it is workflow state."""
    stop: StopRules = Field(default_factory=StopRules)
    output_schema: Annotated[dict[str, Any] | None, BeforeValidator(schema_or_properties)] = None
    """JSON Schema of a structured final answer (or a property list of its fields,
    ``schema_from_properties``)."""
    session: SessionRules = Field(default_factory=SessionRules)
    guardrails: GuardrailRules = Field(default_factory=GuardrailRules)
    hooks: HookNames = Field(default_factory=HookNames)
    """Hooks on the worker that rewrite each model call's messages, or its reply before
    it is recorded (``durable_agent._tools.hooks``)."""
    rescue: RescueRules = Field(default_factory=RescueRules)
    toolsets: list[ToolSource] = Field(default_factory=list)
    """Sources of tools of other kinds, each by its ``kind`` and ``name``: MCP servers
    (``mcp``), HTTP services described by OpenAPI (``openapi``), and sources of kinds the
    workers have; their tools join the session's (listed once, when it starts)."""
    agents: list[SubAgentSpec] = Field(default_factory=list)
    """Other agents this one may call as tools (each call a child session)."""
    secrets: list[str] = Field(default_factory=list)
    """Secret names this session's tools may use as ``{{secret:NAME}}`` in their
    arguments or bound ``context`` values; resolved only inside the tool activity."""
    swarm: SwarmSpec | None = None
    """Several agents in this session, handing the conversation to one another (the
    spec's ``model`` is theirs unless they name their own; ``instructions`` are each
    agent's own)."""
    approvals: ApprovalSettings = Field(default_factory=ApprovalSettings)
    """The gate's rules (allow, deny or ask by tool and arguments), who may decide, and
    escalation at a deadline."""

    @model_validator(mode="before")
    @classmethod
    def _sources_as_toolsets(cls, data: Any) -> Any:
        return sources_from_old_fields(data)

    def sources(self, kind: str) -> list[ToolSource]:
        """The ``toolsets`` entries of one kind."""
        return [t for t in self.toolsets if t.kind == kind]

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        bad = [name for name in value if not SECRET_NAME.fullmatch(name)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a secret name (letters, digits, _)")
        return value

    @field_validator("output_schema")
    @classmethod
    def _usable_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_output_schema(value)
        return value

    @model_validator(mode="after")
    def _unique_tools(self) -> AgentSpec:
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tools: {duplicates[0]!r} is listed more than once")
        unknown_stops = sorted(set(self.stop.on_tools) - set(names))
        if unknown_stops:
            raise ValueError(f"stop.on_tools: {unknown_stops[0]!r} is not among the spec's tools")
        unlisted = sorted(references(self.context) - set(self.secrets))
        if unlisted:
            raise ValueError(f"context: secret {unlisted[0]!r} is not listed in secrets")
        agents = [a.name for a in self.agents]
        clash = sorted({a for a in agents if agents.count(a) > 1 or a in names})
        if clash:
            raise ValueError(f"agents: {clash[0]!r} is the name of another tool or agent")
        servers = [t.name for t in self.toolsets]
        twice = sorted({n for n in servers if servers.count(n) > 1})
        if twice:
            raise ValueError(f"toolsets: {twice[0]!r} is listed more than once")
        choice = self.model.options.tool_choice
        if isinstance(choice, NamedToolChoice) and choice.name not in names:
            raise ValueError(
                f"model.options.tool_choice: {choice.name!r} is not among the spec's tools"
            )
        if self.swarm is not None:
            self._check_swarm(self.swarm, set(names) | set(agents))
        return self

    def _check_swarm(self, swarm: SwarmSpec, shared: set[str]) -> None:
        if self.instructions is not None:
            raise ValueError(
                "instructions: a swarm's agents each have their own (swarm.agents[].instructions)"
            )
        for agent in swarm.agents:
            field = f"swarm.agents[{agent.name}]"
            own = [t.name for t in agent.tools]
            twice = sorted({n for n in own if own.count(n) > 1})
            if twice:
                raise ValueError(f"{field}.tools: {twice[0]!r} is listed more than once")
            if any(n.startswith(HANDOFF_PREFIX) for n in own):
                raise ValueError(f"{field}.tools: names starting {HANDOFF_PREFIX} are handoffs")
        if any(n.startswith(HANDOFF_PREFIX) for n in shared):
            raise ValueError(f"tools: names starting {HANDOFF_PREFIX} are the swarm's handoffs")

    def approval_hooks(self) -> list[str]:
        """Named predicates and the escalation notifier the workers must have loaded,
        and the hooks over each model call."""
        escalation = self.approvals.escalation
        notifier = [escalation.notifier] if escalation and escalation.notifier else []
        return sorted({*self.approvals.predicates(), *notifier, *self.hooks.names()})

    def agent_names(self) -> list[str]:
        """The swarm's agents (empty for a single-agent session)."""
        return [a.name for a in self.swarm.agents] if self.swarm else []


HANDOFF_PREFIX = "transfer_"
TRANSFER_BACK = "transfer_back"
"""The generated tool that hands the conversation back to the previous agent."""


def transfer_tool_name(agent: str) -> str:
    """The generated tool that hands the conversation to ``agent``."""
    return f"{HANDOFF_PREFIX}to_{agent}"


SubAgentSpec.model_rebuild()


class Resumption(SpecModel):
    """Where a new run of an ended session picks its conversation up."""

    run_id: str = Field(min_length=1)
    """The ended run of the same session (workflow id) whose array goes on here: the
    worker reads it back from that run itself, so the input cannot name another
    session's conversation, and it travels by reference, not in this input."""
    message_count: int = Field(default=0, ge=0)
    """How many messages that run ended with: the ``before`` of a message sent while
    this run still reads them back (the array itself always comes from the run)."""
    events_offset: int = Field(default=0, ge=0)
    """Where that run's live events stopped: this run's go on from there."""


class Fork(SpecModel):
    """Where a new session branches from: the first ``at`` messages of another
    session's array, read by the worker from that session and stored by reference."""

    session_id: str = Field(min_length=1)
    run_id: str | None = None
    """Its run to read (unset: the newest)."""
    at: int = Field(ge=1)


#: Messages of a start's history carried in its input; ``AgentClient.start`` sends the
#: rest apart (``AgentInput.earlier``).
INLINE_HISTORY_MESSAGES = 500


class AgentInput(SpecModel):
    """The workflow's input: the spec and the first user message."""

    spec: AgentSpec
    message: str | UserMessage | None = None
    history: list[Message] = Field(default_factory=list)
    """Earlier messages to continue from (after the instructions, before ``message``)."""
    earlier: int = Field(default=0, ge=0, exclude_if=lambda count: count == 0)
    """How many messages come before ``history``, in the ``earlier_history`` signal sent
    with the start (``AgentClient.start`` sends a history longer than
    ``INLINE_HISTORY_MESSAGES`` so). A worker reads them from the run's own history and
    stores them; the run reads them back a page at a time, so no workflow task decodes
    them all. Left out of the payload when 0: a start without one reads on older
    workers."""
    resume: Resumption | None = None
    """Go on with an ended run's conversation (``AgentClient.converse`` sets it)."""
    fork: Fork | None = None
    """Begin with the start of another session's conversation (``SessionHandle.fork``)."""

    @model_validator(mode="after")
    def _one_past(self) -> AgentInput:
        if sum(bool(x) for x in (self.resume, self.history or self.earlier, self.fork)) > 1:
            raise ValueError("resume, history, fork: a session's past comes from one of them")
        if isinstance(self.message, UserMessage) and (
            why := self._first_model().refuses(self.message)
        ):
            raise ValueError(f"message: {why}")
        return self

    def _first_model(self) -> ModelSpec:
        """The model that answers the first message (a swarm's default agent's)."""
        swarm = self.spec.swarm
        if swarm is None:
            return self.spec.model
        name = swarm.default_agent or swarm.agents[0].name
        first = next(a for a in swarm.agents if a.name == name)
        return first.model or self.spec.model
