"""A workflow that breaks the sandbox's rule on purpose: it reads the wall clock.

Declared ``sandboxed=False``, as durable-agent's own workflows are, so which runner
takes it is what ``tests/temporal/test_sandbox.py`` looks at."""

from __future__ import annotations

import datetime

from temporalio import workflow

CLOCK_PROBE = "clock-probe"


@workflow.defn(name=CLOCK_PROBE, sandboxed=False)
class ClockProbe:
    @workflow.run
    async def run(self) -> str:
        return datetime.datetime.now().isoformat()  # what the sandbox forbids
