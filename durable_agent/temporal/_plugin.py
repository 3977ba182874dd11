"""``DurableAgentPlugin``: durable-agent as one Temporal plugin.

Pass it to ``Client.connect(plugins=[...])`` and every worker made from that client runs
sessions: the plugin sets the pydantic data converter (keeping any payload codec the
client has), registers ``AgentWorkflow`` and its activities with the worker's tools,
adds the activities' log and metrics interceptor, and passes the pure modules through
the workflow sandbox. Passed to ``Worker(plugins=[...])`` alone, it gives the worker a
client with that converter too. ``Replayer(plugins=[...])`` replays sessions with it.

Also here: where durable-agent's workflows run (outside temporalio's sandbox unless
asked, and why), and agents loaded from the owner's Python modules (``--agents MODULE``),
whose tools and endpoints a worker registers.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

import structlog
import temporalio.client
import temporalio.worker
import temporalio.workflow
from temporalio.converter import DataConverter, ExternalStorage
from temporalio.plugin import SimplePlugin
from temporalio.worker import (
    UnsandboxedWorkflowRunner,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowRunner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from durable_agent._activities import MessageSink
from durable_agent._activities.approvals import ApprovalActivities
from durable_agent._activities.checks import AdmissionActivities, EvalActivities
from durable_agent._activities.model import ModelActivities
from durable_agent._activities.resumption import ResumptionActivities
from durable_agent._activities.running import CallsInFlight, ObservingInterceptor
from durable_agent._activities.tools import ToolActivities
from durable_agent._activities.transcript_store import TranscriptStore
from durable_agent._agents import Agent
from durable_agent._connection import UpdateRefusals
from durable_agent._contracts.approvals import ApproverKeys
from durable_agent._contracts.boundary import WORKFLOW_NAME, AgentRunError
from durable_agent._contracts.evals import EVAL_WORKFLOW
from durable_agent._errors import DurableAgentError
from durable_agent._payloads.storage import (
    LeanPayloadConverter,
    lean_data_converter,
    with_payload_storage,
)
from durable_agent._providers import ProviderClient
from durable_agent._spec.document import McpServerSpec, OpenApiSpec
from durable_agent._spec.endpoints import LIMITER_WORKFLOW
from durable_agent._spec.secret_values import SecretProvider
from durable_agent._tools.functions import Tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.context import load_tokenizers
from durable_agent._workflows import AgentWorkflow
from durable_agent._workflows.evals import EvalWorkflow
from durable_agent._workflows.limiter import EndpointLimiter
from durable_agent.capabilities import Capabilities

# Where durable-agent's workflows run: outside temporalio's sandbox, unless asked.
#
# The sandbox re-imports workflow code for every run and enters itself, through a
# compiled string, for every activation and for every payload of every command (to
# learn the payload's serialization context). Under load that was about a fifth of
# the worker's CPU (``docs/project/benchmarks.md``). Its guard, no I/O, clock or randomness
# in workflow code, is for code the worker's owner writes; durable-agent's workflows
# run no code of the owner's (tools, hooks, predicates and describers all run in
# activities). So they are declared ``sandboxed=False``, and their determinism is kept
# in CI instead: every recorded history replays *inside* the sandbox
# (``Replayer(plugins=[DurableAgentPlugin(sandboxed=True)])``), so a workflow change that
# reaches for the clock or a file fails there. ``sandboxed=True`` runs them in the
# sandbox in production too, for who wants the check at run time as well; the owner's
# own workflows on the same worker keep whichever runner they had.

#: What workflow code imports that the sandbox takes as it is, instead of importing a
#: second copy for every run: the messages, the spec, the contracts and the errors (an
#: import-linter contract keeps them free of temporalio and HTTP clients). The session's
#: own package is not among them: it holds the loop's rules, which the sandbox guards as
#: workflow code.
PURE_MODULES: Sequence[str] = (
    "durable_agent._errors",
    "durable_agent._errors",
    "durable_agent._wire",
    "durable_agent._spec",
    "durable_agent._contracts",
)


def with_pure_modules(existing: WorkflowRunner | None) -> WorkflowRunner:
    """The sandbox with the pure modules passed through (another runner is kept): for
    the owner's sandboxed workflows, and for ours when ``sandboxed=True``."""
    if existing is None:
        return SandboxedWorkflowRunner(
            restrictions=SandboxedWorkflowRunner().restrictions.with_passthrough_modules(
                *PURE_MODULES
            )
        )
    if isinstance(existing, SandboxedWorkflowRunner):
        restrictions = existing.restrictions.with_passthrough_modules(*PURE_MODULES)
        return dataclasses.replace(existing, restrictions=restrictions)
    return existing


class SandboxingOurs(WorkflowRunner):
    """The runner for a worker's ``sandboxed=False`` workflows that puts durable-agent's
    (by name) in ``sandbox`` and leaves any other to the runner it had."""

    def __init__(
        self, names: Sequence[str], sandbox: WorkflowRunner, others: WorkflowRunner
    ) -> None:
        self._names = frozenset(names)
        self._sandbox = sandbox
        self._others = others

    def _runner(self, defn: temporalio.workflow._Definition) -> WorkflowRunner:
        return self._sandbox if defn.name in self._names else self._others

    def prepare_workflow(self, defn: temporalio.workflow._Definition) -> None:
        self._runner(defn).prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return self._runner(det.defn).create_instance(det)

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        self._sandbox.set_worker_level_failure_exception_types(types)
        self._others.set_worker_level_failure_exception_types(types)


def sandboxing_ours(
    names: Sequence[str], sandbox: WorkflowRunner | None, others: WorkflowRunner | None
) -> WorkflowRunner:
    """``others`` (the worker's runner for unsandboxed workflows) with durable-agent's
    workflows moved into ``sandbox`` (the worker's sandbox, pure modules passed)."""
    return SandboxingOurs(names, with_pure_modules(sandbox), others or UnsandboxedWorkflowRunner())


# Agents from the owner's Python modules: what ``--agents MODULE`` loads.
#
# A worker that loads an agent registers what the agent carries (its model endpoint, the
# MCP servers it gives whole): the module is the owner's code, so what it names is the
# owner's choice. Its sessions then name those things, and a spec from anyone else can
# use them only as the agent does. The CLI and the gateway load the same modules to
# start an agent by its name.

class AgentModuleError(DurableAgentError, ValueError):
    """A module that cannot be imported, holds no agents, or names one twice."""


def load_agents(modules: Sequence[str]) -> dict[str, Agent[Any]]:
    """The agents defined at the top level of ``modules`` (and those they hand off to),
    by name; importing a module registers its ``@tool`` functions as usual."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    found: dict[str, Agent[Any]] = {}
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            raise AgentModuleError(f"cannot import agents module {name!r}: {error}") from None
        agents = [v for v in vars(module).values() if isinstance(v, Agent)]
        if not agents:
            raise AgentModuleError(f"module {name!r} defines no Agent at its top level")
        for agent in agents:
            for member in agent.everyone():
                known = found.setdefault(member.name, member)
                if known is not member:
                    raise AgentModuleError(f"two different agents are named {member.name!r}")
    return found


def with_agents(capabilities: Capabilities, agents: Iterable[Agent[Any]]) -> Capabilities:
    """``capabilities`` and what ``agents`` carry: each model endpoint given whole
    (registered as ``agent:<name>``) and each MCP server given whole."""
    models = dict(capabilities.models)
    rules = dict(capabilities.endpoint_rules)
    servers = {s.name: s for s in capabilities.toolsets if isinstance(s, McpServerSpec)}
    for agent in {a.name: a for top in agents for a in top.everyone()}.values():
        if not isinstance(agent.model_spec.endpoint, str):
            models[f"agent:{agent.name}"] = agent.model_spec.endpoint
            # the agent is the owner's code: the request options it gives are the owner's
            rules[f"agent:{agent.name}"] = {"request_options": list(agent.model_spec.options.extra)}
        for server in agent.mcp_servers:
            if not isinstance(server, McpServerSpec):
                continue
            known = servers.setdefault(server.name, server)
            if known != server:
                raise AgentModuleError(
                    f"agent {agent.name!r}: MCP server {server.name!r} is registered "
                    "otherwise already"
                )
    others = [s for s in capabilities.toolsets if not isinstance(s, McpServerSpec)]
    toolsets: list[McpServerSpec | OpenApiSpec] = [*servers.values(), *others]
    return dataclasses.replace(capabilities, models=models, toolsets=toolsets, endpoint_rules=rules)


def agent_tools(agents: Iterable[Agent[Any]]) -> list[Tool]:
    """The ``@tool`` functions ``agents`` carry: theirs, their teams' and sub-agents'."""
    return [t for top in agents for a in top.everyone() for t in a.tools if isinstance(t, Tool)]


def with_agent_tools(registry: Registry, agents: Iterable[Agent[Any]]) -> Registry:
    """``registry`` with the ``@tool`` functions ``agents`` carry: ``registry`` itself
    when it holds them all already, else a new one (``registry`` is left as it was)."""
    tools = [t for t in agent_tools(agents) if registry.get(t.name) is not t]
    if not tools:
        return registry
    combined = Registry()
    combined.merge(registry)
    for found in tools:
        combined.add(found)
    return combined


PLUGIN_NAME = "durable-agent"
#: Activity slots the completion of a workflow task may reserve for the activities it
#: schedules, which then start on this worker with the server's answer (eager) rather
#: than through the task queue. A batch of up to this many tool calls (most a model asks
#: for at once) starts together and ends close together: its results reach the
#: workflow in fewer tasks, and the server matches none of them. temporalio's own
#: default is 3: a batch of four had its fourth call polled for, and its result
#: mostly came back in a workflow task of its own.
EAGER_ACTIVITIES = 10
#: How long a stopping worker lets its calls in flight finish by default: a long model
#: reply or a typical tool (a supervisor allows the worker a little longer to stop).
DRAIN_SECONDS = 120.0
#: temporalio's default, which a worker given no other value has.
SDK_EAGER_ACTIVITIES = 3
#: The workflows the plugin registers, by name (``sandboxed=False``: see the sandbox section).
OUR_WORKFLOWS = (WORKFLOW_NAME, LIMITER_WORKFLOW, EVAL_WORKFLOW)
log = structlog.get_logger("durable_agent.worker")


def with_pydantic(existing: DataConverter | None) -> DataConverter:
    """The pydantic payload converter that leaves out the nulls of durable-agent's
    models (``lean_payloads``), keeping whatever else ``existing`` set (a payload codec,
    a failure converter)."""
    if existing is None:
        return lean_data_converter
    if existing.payload_converter_class is LeanPayloadConverter:
        return existing
    return dataclasses.replace(existing, payload_converter_class=LeanPayloadConverter)


class DurableAgentPlugin(SimplePlugin):
    """Everything a Temporal client and worker need to run durable-agent sessions.

    ``registry``: what the worker runs and speaks: its tools, guardrails, hooks, tool
    kinds and wire APIs (default: the built-in kinds and APIs, and no tools); ``provider``:
    the HTTP client for model calls; ``transcripts``: the store model calls read the
    array from (default: an in-process cache); ``secrets`` resolves
    ``{{secret:NAME}}`` (default: the worker's environment); ``approver_keys`` checks
    signed decisions (default: ``$DURABLE_AGENT_APPROVER_KEYS``). ``preload_tokenizers``
    loads the installed tokenizers now, as context budgets that count with one need.
    ``capabilities``: what sessions may use, by name (model endpoints, MCP servers,
    OpenAPI services, secrets, task queues) and what else a spec may carry (default:
    the OpenAI endpoint the worker's environment describes, and nothing else); ``agents``:
    agents written in Python whose tools, endpoints and MCP servers the worker registers;
    ``payload_storage``: where payloads over its threshold go, history keeping a
    reference (``durable_agent._payloads.storage``; every client and worker of the
    namespace needs the same); ``message_log``: a sink given every message of the
    sessions the worker serves, once each (``durable_agent._activities.message_log``);
    ``sandboxed``: run durable-agent's workflows inside temporalio's sandbox (about a
    quarter more worker CPU under load; by default they run outside it, their determinism checked by
    replaying recorded histories in the sandbox: ``durable_agent.temporal._plugin``).
    ``eager_activities``: activity slots a workflow task may reserve for what it
    schedules (``EAGER_ACTIVITIES``), for a worker given no value of its own for
    ``max_eager_activity_reservations_per_workflow_task``. ``drain_seconds``: how long
    a stopping worker lets the calls it runs finish (``DRAIN_SECONDS``; temporalio's
    ``graceful_shutdown_timeout``, for a worker given none of its own): a model call
    or a tool in flight at SIGTERM finishes here instead of running again elsewhere;
    ``calls_in_flight`` says what it drained and what it handed over."""

    def __init__(
        self,
        *,
        registry: Registry | None = None,
        provider: ProviderClient | None = None,
        transcripts: TranscriptStore | None = None,
        secrets: SecretProvider | None = None,
        approver_keys: ApproverKeys | None = None,
        preload_tokenizers: bool = True,
        capabilities: Capabilities | None = None,
        agents: Sequence[Agent[Any]] = (),
        payload_storage: ExternalStorage | None = None,
        message_log: MessageSink | None = None,
        sandboxed: bool = False,
        eager_activities: int = EAGER_ACTIVITIES,
        drain_seconds: float = DRAIN_SECONDS,
    ) -> None:
        if eager_activities < 1:
            raise ValueError(
                f"eager_activities must be at least 1, not {eager_activities} "
                "(a worker turns eager activities off with disable_eager_activity_execution)"
            )
        self._payload_storage = payload_storage
        self._sandboxed = sandboxed
        self._eager_activities = eager_activities
        if drain_seconds < 0:
            raise ValueError(f"drain_seconds cannot be negative ({drain_seconds})")
        self._drain = timedelta(seconds=drain_seconds)
        self.calls_in_flight = CallsInFlight()
        """What the worker runs now, and what its stop drained or handed over."""
        capabilities = with_agents(capabilities or Capabilities(), agents)
        self._capabilities = capabilities
        warning = capabilities.policy.warning()
        if warning:  # loud on purpose: the starter of a session now owns the machine
            print(warning, file=sys.stderr, flush=True)
            log.warning(
                "worker policy trusts spec fields",
                trusted_spec_fields=capabilities.policy.allowed(),
            )
        if preload_tokenizers:
            load_tokenizers()  # context budgets count tokens in workflow code: no file reads
        transcripts = transcripts or TranscriptStore()
        registry = with_agent_tools(registry if registry is not None else Registry(), agents)
        model = ModelActivities(
            provider,
            transcripts,
            capabilities=capabilities,
            message_log=message_log,
            registry=registry,
        )
        tools = ToolActivities(registry, transcripts, secrets, capabilities)
        admission = AdmissionActivities(capabilities, registry, message_log=message_log is not None)
        approvals = ApprovalActivities(registry, approver_keys)
        resumption = ResumptionActivities(transcripts)
        super().__init__(
            PLUGIN_NAME,
            data_converter=self._converter,
            interceptors=[ObservingInterceptor(), self.calls_in_flight, UpdateRefusals()],
            workflows=[AgentWorkflow, EndpointLimiter, EvalWorkflow],
            activities=[
                admission.admit_session,
                admission.check_tool_routes,
                model.call_model,
                model.store_transcript,
                model.load_transcript,
                model.reply_calls,
                resumption.closed_conversation,
                resumption.forked_conversation,
                resumption.started_conversation,
                EvalActivities().score_case,
                tools.resolve_tools,
                approvals.check_approvals,
                approvals.describe_calls,
                approvals.verify_approver_tokens,
                approvals.notify_escalation,
                tools.run_tool,
                tools.check_guardrails,
                tools.list_remote_tools,
                model.summarise_context,
            ],
            workflow_runner=with_pure_modules,
            # an agent run inside the owner's workflow that ends without an answer fails
            # that workflow, rather than its task retrying forever
            workflow_failure_exception_types=_with_agent_run_error,
        )

    def _converter(self, existing: DataConverter | None) -> DataConverter:
        return with_payload_storage(with_pydantic(existing), self._payload_storage)

    def configure_worker(
        self, config: temporalio.worker.WorkerConfig
    ) -> temporalio.worker.WorkerConfig:
        """As ``SimplePlugin`` does, and a client with the pydantic converter when the
        worker's client was made without this plugin; ``eager_activities`` slots a
        workflow task may reserve, unless the worker was given its own number."""
        config = super().configure_worker(config)
        _warn_of_missing_keys(self._capabilities)
        eager = config.get("max_eager_activity_reservations_per_workflow_task")
        if eager in (None, SDK_EAGER_ACTIVITIES):
            config["max_eager_activity_reservations_per_workflow_task"] = self._eager_activities
        if not config.get("graceful_shutdown_timeout"):  # temporalio's default: none
            config["graceful_shutdown_timeout"] = self._drain
        if self._sandboxed:
            runners = config.get("workflow_runner"), config.get("unsandboxed_workflow_runner")
            config["unsandboxed_workflow_runner"] = sandboxing_ours(OUR_WORKFLOWS, *runners)
        client = config["client"]
        current = client.data_converter
        wanted = self._converter(current)
        if wanted is not current:
            settings = client.config()
            settings["data_converter"] = wanted
            config["client"] = temporalio.client.Client(**settings)
        return config

    def configure_replayer(
        self, config: temporalio.worker.ReplayerConfig
    ) -> temporalio.worker.ReplayerConfig:
        """As ``SimplePlugin`` does, with durable-agent's workflows in the sandbox when
        ``sandboxed``."""
        config = super().configure_replayer(config)
        if self._sandboxed:
            runners = config.get("workflow_runner"), config.get("unsandboxed_workflow_runner")
            config["unsandboxed_workflow_runner"] = sandboxing_ours(OUR_WORKFLOWS, *runners)
        return config


def _with_agent_run_error(
    existing: Sequence[type[BaseException]] | None,
) -> Sequence[type[BaseException]]:
    return [*(existing or ()), AgentRunError]


def _warn_of_missing_keys(capabilities: Capabilities) -> None:
    """Say when a worker starts, not at a session's first call, that a registered
    endpoint's key variable is unset (not when every call goes to a development model)."""
    registered = {} if capabilities.every_model is not None else capabilities.models
    for name, endpoint in registered.items():
        if endpoint.api_key_env and not os.environ.get(endpoint.api_key_env):
            log.warning(
                "a model endpoint's key variable is unset: its calls fail until it is set",
                endpoint=name,
                variable=endpoint.api_key_env,
            )


def calls_in_flight(worker: temporalio.worker.Worker) -> CallsInFlight:
    """What a worker running durable-agent runs now, and what its stop drained or
    handed over (a worker given the plugin, or made from a client that has it)."""
    config = worker.config()
    plugins = [*config.get("plugins", []), *config["client"].config().get("plugins", [])]
    for plugin in plugins:
        if isinstance(plugin, DurableAgentPlugin):
            return plugin.calls_in_flight
    raise ValueError("this worker has no DurableAgentPlugin: it runs no durable-agent calls")


def has_plugin(client: temporalio.client.Client) -> bool:
    """Whether ``client`` was made with a ``DurableAgentPlugin`` (its workers get it)."""
    return any(isinstance(p, DurableAgentPlugin) for p in client.config().get("plugins", []))
