"""Where durable-agent's workflows run: outside temporalio's sandbox, unless asked.

The sandbox re-imports workflow code for every run and enters itself, through a
compiled string, for every activation and for every payload of every command (to
learn the payload's serialization context). Under load that was about a fifth of
the worker's CPU (``docs/project/benchmarks.md``). Its guard, no I/O, clock or randomness
in workflow code, is for code the worker's owner writes; durable-agent's workflows
run no code of the owner's (tools, hooks, predicates and describers all run in
activities). So they are declared ``sandboxed=False``, and their determinism is kept
in CI instead: every recorded history replays *inside* the sandbox
(``Replayer(plugins=[DurableAgentPlugin(sandboxed=True)])``), so a workflow change that
reaches for the clock or a file fails there. ``sandboxed=True`` runs them in the
sandbox in production too, for who wants the check at run time as well; the owner's
own workflows on the same worker keep whichever runner they had.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import temporalio.workflow
from temporalio.worker import (
    UnsandboxedWorkflowRunner,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowRunner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

#: What workflow code imports that the sandbox takes as it is, instead of importing a
#: second copy for every run: the messages, the spec, the contracts and the errors (an
#: import-linter contract keeps them free of temporalio and HTTP clients). The session's
#: own package is not among them: it holds the loop's rules, which the sandbox guards as
#: workflow code.
PURE_MODULES: Sequence[str] = (
    "durable_agent._errors",
    "durable_agent._failures",
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
