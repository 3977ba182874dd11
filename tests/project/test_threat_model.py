"""The threat model's rows come from what exists. This test lists, from the code, every
field a starter can set (the start input's JSON schema, every signal's and update's
argument, the gateway's request bodies), every tool kind and wire API a worker
registers, every route of the gateway and every signal, update and query of the
workflows a worker runs; each must be named on the security page under a capability
row, and each row must name a test that exists. A new field or capability cannot land
without its row and its test: this test fails first."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from durable_agent._workflows.continuation import ContinuedInput
from pydantic import BaseModel, TypeAdapter
from starlette.routing import BaseRoute, Mount, Route
from temporalio import workflow

from durable_agent._contracts.approvals import (
    ChildApprovals,
    DecisionRequest,
    RevokeGrantSignal,
)
from durable_agent._contracts.boundary import (
    BudgetSignal,
    CancelTurnSignal,
    EndSessionSignal,
    FlushSignal,
    MoveToAgentSignal,
)
from durable_agent._contracts.capacity import LedgerState
from durable_agent._contracts.evals import EvalInput
from durable_agent._contracts.wake_ups import WakeUpRequest
from durable_agent._payloads.encryption import CodecKeys, EncryptionCodec
from durable_agent._spec.document import AgentInput
from durable_agent._spec.endpoints import CapacityRelease, CapacityRequest
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, SystemMessage, UserMessage
from durable_agent.gateway import _app as gateway_app
from durable_agent.gateway import create_app
from durable_agent.gateway._ai_sdk import UIChatRequest
from durable_agent.gateway._openai_chat import ChatRequest
from durable_agent.gateway._openai_responses import ResponsesRequest
from durable_agent.gateway._wake_up_routes import WakeUpBody
from durable_agent.temporal import DurableAgentPlugin

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "concepts" / "security.md"
CITED = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")
CAPABILITIES = "## Every capability, its threat and its test"
INDEX = "## Everything a starter can reach, and its row"

#: Every argument a starter can give a workflow a worker runs: each workflow's start
#: input (a session's, a continued session's, an endpoint limiter's, an evaluation's:
#: anyone who can start a workflow can start any of them), what each signal and update
#: takes, and the request bodies of the gateway's OpenAI and wake-up doors.
STARTER_INPUTS: tuple[Any, ...] = (
    AgentInput,
    ContinuedInput,
    LedgerState,
    EvalInput,
    ChatRequest,
    ResponsesRequest,
    UIChatRequest,
    UserMessage,
    SystemMessage,
    AssistantMessage,
    DecisionRequest,
    RevokeGrantSignal,
    ChildApprovals,
    EndSessionSignal,
    CancelTurnSignal,
    MoveToAgentSignal,
    FlushSignal,
    BudgetSignal,
    CapacityRequest,
    CapacityRelease,
    WakeUpRequest,
    WakeUpBody,
)


def _gateway_bodies() -> list[type[BaseModel]]:
    """The REST routes' request bodies (every ``Body`` the gateway's app module defines)."""
    return [
        value
        for value in vars(gateway_app).values()
        if isinstance(value, type)
        and issubclass(value, gateway_app.Body)
        and value is not gateway_app.Body
    ]


def fields() -> set[str]:
    """``Object.field`` for every field of every object a starter's input can hold."""
    schema = TypeAdapter(tuple[*STARTER_INPUTS, *_gateway_bodies()]).json_schema()  # type: ignore[misc]
    found = set()
    for name, definition in schema.get("$defs", {}).items():
        for field in definition.get("properties", {}):
            found.add(f"{name}.{field}")
    return found


def _paths(routes: list[BaseRoute], prefix: str = "") -> Iterator[str]:
    for route in routes:
        if isinstance(route, Mount):
            yield from _paths(list(route.routes), prefix + route.path)
        elif isinstance(route, Route):
            methods = sorted((route.methods or {"GET"}) - {"HEAD"})
            for method in methods:
                yield f"{method} {prefix}{route.path}"


def routes() -> set[str]:
    """Every route the gateway serves, the codec endpoint's included."""

    class NoClient:
        """The app is only built here, never asked: it needs no client."""

    codec = EncryptionCodec(CodecKeys((("k1", b"0" * 32),)))
    app = create_app(NoClient(), None, codec=codec)  # type: ignore[arg-type]
    return set(_paths(list(app.routes)))


def handlers() -> set[str]:
    """``Workflow signal name`` (and update, query) of every workflow a worker runs."""
    found = set()
    for cls in DurableAgentPlugin().workflows:
        definition = workflow._Definition.from_class(cls)
        assert definition is not None
        for kind, named in (
            ("signal", definition.signals),
            ("update", definition.updates),
            ("query", definition.queries),
        ):
            found |= {f"{definition.name} {kind} {name}" for name in named if name}
    return found


def registered() -> set[str]:
    """The tool kinds and wire APIs every worker registers."""
    registry = Registry()
    return {f"tool kind {k}" for k in registry.kinds()} | {f"wire API {a}" for a in registry.apis()}


def _section(title: str) -> str:
    return PAGE.read_text().split(title, 1)[1].split("\n## ", 1)[0]


def capability_rows() -> dict[str, str]:
    rows = {}
    for line in _section(CAPABILITIES).splitlines():
        if line.startswith("| **"):
            rows[line.split("**", 2)[1]] = line
    return rows


_LABELS = {
    "tool kinds": "tool kind",
    "wire APIs": "wire API",
    "routes": "",
}
_HANDLER_LABEL = re.compile(r"`([\w-]+)` (signals|updates|queries)")


def indexed() -> dict[str, str]:
    """What the page's index names, each with the capability row it points to."""
    names: dict[str, str] = {}
    for line in _section(INDEX).splitlines():
        if not line.startswith("| ") or line.startswith("| ---") or line.startswith("| what"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert len(cells) == 2, f"an index line has two cells, what and its row: {line}"
        what, row = cells
        label, _, listed = what.partition(":")
        assert row.startswith("**") and row.endswith("**"), f"name the row in bold: {line}"
        items = re.findall(r"`([^`]+)`", listed)
        assert items, f"an index line lists names in backticks after its label: {line}"
        label = label.strip()
        if match := re.fullmatch(r"`(\w+)`", label):
            keys = [f"{match.group(1)}.{item}" for item in items]
        elif match := _HANDLER_LABEL.fullmatch(label):
            kind = match.group(2).rstrip("s").replace("querie", "query")
            keys = [f"{match.group(1)} {kind} {item}" for item in items]
        else:
            assert label in _LABELS, f"an index line's label is unknown: {label!r}"
            prefix = _LABELS[label]
            keys = [f"{prefix} {item}".strip() for item in items]
        for key in keys:
            assert key not in names, f"{key} is named twice in the index"
            names[key] = row.strip("*")
    return names


def _tests_in(path: Path) -> set[str]:
    """The test functions a file defines (read as text: a test's name is on its line)."""
    return set(re.findall(r"^(?:async )?def (test_\w+)\(", path.read_text(), re.M))


def test_every_test_the_security_page_names_exists() -> None:
    missing = []
    for file, name in CITED.findall(PAGE.read_text()):
        path = ROOT / file
        if not path.is_file():
            missing.append(file)
        elif name and name not in _tests_in(path):
            missing.append(f"{file}::{name}")
    assert missing == [], f"the security page names tests that do not exist: {missing}"


def test_every_capability_row_names_a_test_function() -> None:
    for name, line in capability_rows().items():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert len(cells) == 4, f"{name}: capability, threat, what holds, shown by"
        assert any(n for _, n in CITED.findall(cells[3])), f"{name}: names no test function"


def test_everything_a_starter_can_reach_has_a_row() -> None:
    exists = fields() | routes() | handlers() | registered()
    named = indexed()
    missing = sorted(exists - named.keys())
    assert missing == [], (
        f"{len(missing)} things a starter can reach have no row on the security page "
        f"(add each to '{INDEX}' under the capability row whose test shows it): {missing}"
    )
    gone = sorted(named.keys() - exists)
    assert gone == [], f"the security page's index names what no longer exists: {gone}"
    rows = capability_rows()
    unknown = sorted({row for row in named.values() if row not in rows})
    assert unknown == [], f"the index points to rows the capability table lacks: {unknown}"


def test_the_enumeration_sees_each_source() -> None:
    """The lists the index is held against are not empty, and a field added to the spec
    shows up in them (so a new field fails the test above)."""
    assert "ModelOptions.extra" in fields() and "UserMessage.content" in fields()
    assert "StartBody.message" in fields() and "CapacityRequest.limits" in fields()
    assert "POST /v1/chat/completions" in routes() and "POST /codec/decode" in routes()
    assert "AgentWorkflow signal approve" in handlers()
    assert "tool kind function" in registered() and "wire API chat" in registered()

    class Widened(BaseModel):
        new_field: str

    schema = TypeAdapter(tuple[AgentInput, Widened]).json_schema()
    assert "new_field" in schema["$defs"]["Widened"]["properties"]
