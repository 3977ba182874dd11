"""The rules behind the worker's registries, one by one: which addresses a URL from a
spec may reach, what a spec's reference may change of a registered entry, the worker's
file, agents compiled to specs that only name what their worker registers, and remote
calls that stay at the service the worker registered (over real HTTP)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from durable_agent import Agent, ModelSpec
from durable_agent._spec.document import McpServerSpec, OpenApiSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._spec.tool_kinds import HttpCall, HttpOperation, WorkerSide
from durable_agent._tools.mcp_servers import McpRunner
from durable_agent._tools.openapi import OpenApiRunner, call_operation
from durable_agent.capabilities import Capabilities, SpecPolicy, load_capabilities
from durable_agent.capabilities._config_file import CapabilitiesFileError
from durable_agent.capabilities._urls import UrlRefused, check_url
from durable_agent.extending import NotAllowed, NotRegistered
from durable_agent.temporal._plugin import AgentModuleError, with_agents
from tests.support.recording_server import RecordingServer


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1:8080/x", "loopback"),
        ("http://[::1]/x", "loopback"),
        ("http://[::ffff:127.0.0.1]/x", "loopback"),
        ("http://localhost/x", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.0.0.7/x", "private"),
        ("http://192.168.1.1/x", "private"),
        ("http://172.16.0.1/x", "private"),
        ("http://0.0.0.0/x", "unspecified"),
        ("http://224.0.0.1/x", "multicast"),
        # shared address space (carrier NAT; Alibaba Cloud's metadata service is here)
        ("http://100.64.0.1/x", "non-public"),
        ("http://100.100.100.200/latest/meta-data", "non-public"),
        ("http://198.18.0.1/x", "private"),
        ("http://192.0.0.8/x", "non-public"),
        # IPv6 addresses that carry an IPv4 one: 6to4, NAT64, Teredo
        ("http://[2002:a9fe:a9fe::1]/latest/meta-data", "link-local"),
        ("http://[64:ff9b::a9fe:a9fe]/x", "link-local"),
        ("http://[64:ff9b::a00:7]/x", "private"),
        ("http://[2001::1]/x", "unspecified"),
        ("http://[fd00:ec2::254]/x", "private"),
        # site-local (fec0::/10), which ``is_global`` alone lets through
        ("http://[fec0::1]/x", "site-local"),
        ("http://[feff:ffff::1]/x", "site-local"),
    ],
)
async def test_urls_to_the_workers_own_networks_are_refused(url: str, kind: str) -> None:
    with pytest.raises(UrlRefused, match=f"reaches a {kind} address"):
        await check_url(url, private_allowed=False)
    await check_url(url, private_allowed=True)  # a policy for local development


async def test_public_addresses_pass_and_other_schemes_do_not() -> None:
    await check_url("https://93.184.216.34/v1", private_allowed=False)
    await check_url("https://[2606:4700::1111]/v1", private_allowed=False)
    await check_url("https://[2002:5db8:d822::1]/v1", private_allowed=False)  # 6to4 of a public one
    for url in ("file:///etc/passwd", "gopher://93.184.216.34/", "http:///nohost"):
        with pytest.raises(UrlRefused):
            await check_url(url, private_allowed=True)


@pytest.mark.parametrize(
    "host", ["metadata.google.internal", "METADATA.google.internal.", "instance-data", "metadata"]
)
async def test_cloud_metadata_names_are_refused_whatever_they_resolve_to(host: str) -> None:
    with pytest.raises(UrlRefused, match="names a cloud metadata service"):
        await check_url(f"http://{host}/computeMetadata/v1/", private_allowed=False)


async def test_a_reference_narrows_a_registered_server_and_never_widens_it() -> None:
    clock = McpServerSpec(
        name="clock",
        command="uvx",
        args=["mcp-server-time"],
        env=["TZ_KEY"],
        allowed_tools=["get_current_time", "convert_time"],
        approval="always",
    )
    worker, mcp = WorkerSide(Capabilities(toolsets=[clock])), McpRunner()
    chosen = McpServerSpec(name="clock", allowed_tools=["convert_time"], prefix="t_")
    used = await mcp.admit(chosen, worker)
    assert (used.command, used.args, used.env) == ("uvx", ["mcp-server-time"], ["TZ_KEY"])
    assert used.allowed_tools == ["convert_time"] and used.tool_prefix == "t_"
    assert used.approval == "always"  # a spec cannot make it laxer
    laxer = McpServerSpec(name="clock", approval="never")
    assert (await mcp.admit(laxer, worker)).approval == "always"
    with pytest.raises(NotAllowed, match="allowed_tools delete_everything are not among"):
        await mcp.admit(McpServerSpec(name="clock", allowed_tools=["delete_everything"]), worker)
    with pytest.raises(NotRegistered, match=r"'files' is not registered .* \(registered: clock\)"):
        await mcp.admit(McpServerSpec(name="files"), worker)


async def test_an_inline_endpoint_is_taken_only_when_the_worker_registered_the_same() -> None:
    mine = ProviderEndpoint(base_url="https://llm.example.com/v1", api_key_env="LLM_KEY")
    capabilities = Capabilities(models={"mine": mine})
    assert await capabilities.endpoint("mine") == mine
    assert await capabilities.endpoint(mine.model_copy()) == mine
    other_key = mine.model_copy(update={"api_key_env": "AWS_SECRET_ACCESS_KEY"})
    with pytest.raises(NotAllowed, match="key from AWS_SECRET_ACCESS_KEY"):
        await capabilities.endpoint(other_key)
    with pytest.raises(NotRegistered, match=r"'theirs' is not registered .*\(registered: mine\)"):
        await capabilities.endpoint("theirs")


def test_the_policy_is_strict_unless_told_and_says_so_loudly() -> None:
    assert SpecPolicy().warning() is None and SpecPolicy().allowed() == []
    warning = SpecPolicy(inline_sources=["mcp"]).warning()
    assert warning and warning.startswith("WARNING") and "inline mcp" in warning
    assert len(SpecPolicy.development().allowed()) == 7


def test_the_workers_file_registers_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.toml"
    path.write_text(
        'task_queues = ["gpu"]\n'
        'file_origins = ["https://files.example.com", "https://docs.example.com/public/"]\n'
        "file_limits = {max_files = 4, max_bytes = 1000000}\n"
        '[models.local]\nbase_url = "http://10.0.0.5:11434/v1"\napi_key_env = "LOCAL_KEY"\n'
        '[mcp_servers.time]\ncommand = "uvx"\nargs = ["mcp-server-time"]\n'
        '[openapi.billing]\ndocument = "https://billing.example.com/openapi.json"\n'
        '[secrets.GITHUB_TOKEN]\ntools = ["create_issue"]\nparameters = ["token"]\n'
        "[policy]\ninline_endpoints = true\n"
        '[prices."llama-3.3-70b"]\ninput_per_million = 0.6\noutput_per_million = 0.8\n'
    )
    loaded = load_capabilities(path)
    assert loaded.models["local"].base_url == "http://10.0.0.5:11434/v1"
    assert loaded.prices["llama-3.3-70b"].output_per_million == 0.8
    assert loaded.secret_variable("GITHUB_TOKEN", "create_issue", "token") == "GITHUB_TOKEN"
    with pytest.raises(NotAllowed, match="may not be given to create_issue"):
        loaded.secret_variable("GITHUB_TOKEN", "create_issue", "body")
    assert loaded.task_queue_allowed("gpu", "main") and not loaded.task_queue_allowed("x", "main")
    assert loaded.policy.inline_endpoints and not loaded.policy.gives_whole("mcp")
    # files by URL: that origin alone (its port, its scheme), whatever the path
    assert loaded.file_fetchable("https://files.example.com/a/report.pdf")
    assert not loaded.file_fetchable("https://files.example.com:8443/report.pdf")
    assert not loaded.file_fetchable("http://files.example.com/report.pdf")
    assert not loaded.file_fetchable("https://files.example.com.evil.test/report.pdf")
    assert not loaded.file_fetchable("file:///etc/passwd")
    # an entry with a path: that path alone, as the origin would resolve it
    shown = "https://docs.example.com/public/a%20b.pdf?v=2"
    assert loaded.file_fetchable(shown) == shown
    assert not loaded.file_fetchable("https://docs.example.com/private/a.pdf")
    assert not loaded.file_fetchable("https://docs.example.com/public/%2e%2e/private/a.pdf")
    assert loaded.file_limits.max_files == 4 and loaded.file_limits.max_bytes == 1_000_000
    path.write_text("file_limits = {max_file = 4}\n")
    with pytest.raises(CapabilitiesFileError, match="no setting 'max_file'"):
        load_capabilities(path)
    with pytest.raises(ValueError, match="only http:// and https://"):
        Capabilities(file_origins=["ftp://files.example.com"])
    path.write_text('[mcp_servers.time]\ncomand = "uvx"\n')
    with pytest.raises(
        CapabilitiesFileError,
        match=r"capabilities.toml: mcp_servers.time.comand: Extra inputs are not permitted",
    ):
        load_capabilities(path)
    (tmp_path / "bad.json").write_text(json.dumps({"polcy": {}}))
    with pytest.raises(CapabilitiesFileError, match=r"bad\.json: polcy: Extra inputs"):
        load_capabilities(tmp_path / "bad.json")


def test_an_agent_names_its_servers_and_its_worker_registers_them() -> None:
    model = ModelSpec(name="m", endpoint=ProviderEndpoint(base_url="https://llm.example.com/v1"))
    clock = McpServerSpec(name="clock", command=sys.executable, args=["-m", "mcp_server_time"])
    billing = Agent(name="billing", model=model, instructions="Refunds.", description="money")
    triage = Agent(
        name="triage", model=model, instructions="Route.", mcp_servers=[clock], handoffs=[billing]
    )
    spec = triage.spec()
    assert [s.model_dump(exclude_defaults=True) for s in spec.toolsets] == [
        {"kind": "mcp", "name": "clock"}
    ]
    assert spec.swarm is not None and spec.swarm.default == "triage"
    assert [(a.name, a.handoffs) for a in spec.swarm.agents] == [
        ("triage", ["billing"]),
        ("billing", []),
    ]
    assert spec.swarm.agent("billing").description == "money"
    registered = with_agents(Capabilities(models={}), triage.team())
    assert registered.models["agent:triage"] == model.endpoint
    assert [s.command for s in registered.toolsets if isinstance(s, McpServerSpec)] == [
        sys.executable
    ]
    other = McpServerSpec(name="clock", command="sh")
    twin = Agent(name="twin", model=model, mcp_servers=[other])
    with pytest.raises(AgentModuleError, match="'clock' is registered otherwise"):
        with_agents(registered, [twin])


def _call(url: str, api: str = "orders", method: str = "GET") -> HttpCall:
    operation = HttpOperation(api=api, method=method, url=url)
    return HttpCall(operation=operation, headers={"X-Key": "SOME_WORKER_VARIABLE"})


ORDERS_DOCUMENT = {
    "openapi": "3.1.0",
    "paths": {
        "/orders/{order_id}": {
            "get": {
                "operationId": "getOrder",
                "parameters": [{"name": "order_id", "in": "path", "required": True}],
            }
        },
        "/admin/wipe-all": {"post": {"operationId": "wipeAll"}},
    },
}


async def test_a_remote_call_goes_only_to_its_registered_service() -> None:
    """A call input pointing a registered service's tool at another host, or at an
    operation its document does not have, or one the session's entry leaves out (a
    forged continue-as-new input could) is refused, and nothing is sent: the only
    request any server hears is the worker reading the registered document."""
    routes = {"/openapi.json": (200, {}, ORDERS_DOCUMENT)}
    with RecordingServer(routes) as service, RecordingServer() as elsewhere:
        registered = OpenApiSpec(
            name="orders",
            document=f"{service.url}/openapi.json",
            base_url=f"{service.url}/api",
            headers={"X-Api-Key": "ORDERS_KEY"},
        )
        worker, runner = WorkerSide(Capabilities(toolsets=[registered])), OpenApiRunner()
        good = _call(f"{service.url}/api/orders/{{order_id}}")
        forged = good.operation.model_copy(update={"header": ["Authorization"]})
        operation, headers = await runner.checked(
            good.model_copy(update={"operation": forged}), worker
        )
        assert headers == {"X-Api-Key": "ORDERS_KEY"}  # the worker's, not the input's
        assert operation.path == ["order_id"] and operation.header == []  # the registry's
        with pytest.raises(NotAllowed, match="is not an operation of the registered service"):
            await runner.checked(_call(f"{elsewhere.url}/steal"), worker)
        with pytest.raises(NotAllowed, match="is not an operation of the registered service"):
            await runner.checked(_call(f"{service.url}/api/orders/all", method="DELETE"), worker)
        narrowed = _call(f"{service.url}/api/admin/wipe-all", method="POST")
        await runner.checked(narrowed, worker)  # the service's: the session did not narrow it
        with pytest.raises(NotAllowed, match="is not an operation of the registered service"):
            await runner.checked(narrowed.model_copy(update={"operations": ["getOrder"]}), worker)
        with pytest.raises(NotAllowed, match="'unlisted' is not registered"):
            await runner.checked(_call(f"{elsewhere.url}/x", api="unlisted"), worker)
    assert elsewhere.seen == []
    assert [s.path for s in service.seen] == ["/openapi.json"]  # read once, then kept


async def test_a_redirect_is_answered_as_it_is_never_followed() -> None:
    with RecordingServer() as target:
        routes = {"/go": (302, {"Location": f"{target.url}/stolen"}, {})}
        with RecordingServer(routes) as service:
            text, is_error = await call_operation(_call(f"{service.url}/go").operation, {}, {})
    assert is_error and text.startswith("HTTP 302")
    assert [s.path for s in service.seen] == ["/go"] and target.seen == []


async def test_a_path_value_stays_one_segment_of_its_operation() -> None:
    """Path values are encoded whole (a ``/`` stays inside its segment, a ``%`` is sent
    as itself), and values that are dot segments are refused before anything is sent,
    so no value turns ``DELETE /orders/7/items/{item_id}`` into ``DELETE /orders/7``."""
    with RecordingServer() as service:
        operation = HttpOperation(
            api="shop",
            method="DELETE",
            url=f"{service.url}/orders/{{order_id}}/items/{{item_id}}",
            path=["order_id", "item_id"],
        )
        for value in ("..", ".", ""):
            text, is_error = await call_operation(
                operation, {}, {"order_id": "7", "item_id": value}
            )
            assert is_error and "is not a value a path segment takes" in text
        assert service.seen == []
        for value in ("a/b", "%2e%2e", "../../admin"):
            _, is_error = await call_operation(operation, {}, {"order_id": "7", "item_id": value})
            assert not is_error
    sent = [s.path for s in service.seen]
    assert sent == [
        "/orders/7/items/a%2Fb",
        "/orders/7/items/%252e%252e",
        "/orders/7/items/..%2F..%2Fadmin",
    ]
