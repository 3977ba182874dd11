"""What a model server fetches or looks up itself goes only where the worker's owner
allows. An image or file URL is handed to the server when ``file_origins`` allows it,
or, on an endpoint whose owner does not ask for ``only_file_origins``, when its host is
on a public address; never a loopback, private or link-local one (a self-hosted server
would fetch it from inside the owner's network). An endpoint on a private address
takes only ``file_origins`` unless its owner says otherwise. A provider file id goes
only when the owner lists it. Anything else is left out with a marker. Shown by the
request bodies the scripted provider received over real HTTP; nothing here fetches
any of these URLs (the addresses are literal: no name is looked up either)."""

from __future__ import annotations

from typing import Any

from durable_agent._activities.files import ProviderParts
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, AgentSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import (
    FileData,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    file_part_from_id,
    file_part_from_url,
    image_part,
    user_message,
)
from durable_agent._wire.outgoing import PreparedMessages
from durable_agent.capabilities import Capabilities
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import json_reply
from tests.support.agent_harness import running_worker
from tests.support.file_origin import FileOrigin

METADATA = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
PUBLIC = "http://93.184.216.34/cat.png"  # a public address: handed on, never fetched here
PIXEL = "data:image/png;base64,iVBORw0KGgo="
URL_LEFT_OUT = "[image omitted: this worker does not hand the model server that URL]"
ID_LEFT_OUT = "this worker does not send that provider file id]"


def spec(endpoint: str) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "model": {"name": "m", "endpoint": endpoint, "max_attempts": 1, "stream": False},
            "session": {"end_after_reply": True},
        }
    )


def handed(body: dict[str, Any]) -> list[str]:
    """Each image part of the request's user message: its URL, or the marker's text."""
    content = body["messages"][-1]["content"]
    return [p["image_url"]["url"] if p["type"] == "image_url" else p["text"] for p in content[1:]]


async def run(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    capabilities: Capabilities,
    endpoint: str,
    message: Any,
) -> None:
    async with running_worker(
        temporal_env, task_queue, Registry(), capabilities=capabilities
    ) as client:
        agents = AgentClient(client, task_queue=task_queue)
        session = await agents.start(spec(endpoint), message)
        result = await agents.session(session).result()
        assert result.status == "done", result.error


async def test_a_self_hosted_server_is_handed_only_urls_its_owner_registered(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """An endpoint on 127.0.0.1 with no rule: only ``<origin>/public/`` goes (as
    checked: the dot segment resolved); the private path, the metadata service and
    even a public address are left out; a ``data:`` image is inline and goes."""
    with FileOrigin() as o, ScriptedProvider([assistant_text("seen")]) as provider:
        local = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        capabilities = Capabilities(models={"local": local}, file_origins=[f"{o.url}/public/"])
        urls = [
            f"{o.url}/public/a/../cat.png",
            f"{o.url}/private/x.png",
            f"{o.url}/public/../private/x.png",
            METADATA,
            PUBLIC,
            PIXEL,
        ]
        message = user_message("look", *(image_part(u) for u in urls))
        await run(temporal_env, task_queue, capabilities, "local", message)
    assert handed(provider.bodies()[0]) == [
        f"{o.url}/public/cat.png",
        URL_LEFT_OUT,
        URL_LEFT_OUT,
        URL_LEFT_OUT,
        URL_LEFT_OUT,
        PIXEL,
    ]
    assert o.asked == [], "the worker fetched none of them"


async def test_a_hosted_provider_is_handed_public_urls_but_never_private_ones(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """``only_file_origins = false`` (a provider that fetches from the internet): a
    public address goes too; loopback, link-local (also inside an IPv6 address),
    private and unresolvable hosts never do."""
    with FileOrigin() as o, ScriptedProvider([assistant_text("seen")]) as provider:
        hosted = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        capabilities = Capabilities(
            models={"hosted": hosted},
            file_origins=[f"{o.url}/public/"],
            endpoint_rules={"hosted": {"only_file_origins": False}},
        )
        urls = [
            PUBLIC,
            f"{o.url}/public/cat.png",
            f"{o.url}/private/x.png",
            METADATA,
            "http://[::ffff:169.254.169.254]/latest/meta-data/",
            "http://10.0.0.7/internal.png",
            "http://metadata.google.internal/computeMetadata/v1/",
            "file:///etc/passwd",
        ]
        message = user_message("look", *(image_part(u) for u in urls))
        await run(temporal_env, task_queue, capabilities, "hosted", message)
    assert handed(provider.bodies()[0]) == [PUBLIC, f"{o.url}/public/cat.png"] + [URL_LEFT_OUT] * 6
    assert o.asked == []


def responses_done(text: str) -> Any:
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }
    return json_reply({"id": "resp_1", "status": "completed", "output": [message]})


async def test_a_provider_file_id_goes_only_where_the_owner_lists_it(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """On the Responses API (which takes file ids and file URLs): an id the owner
    listed goes, another user's does not, and neither goes to an endpoint with no
    list; a file by a private URL is left out too."""
    with ScriptedProvider([responses_done("one"), responses_done("two")]) as provider:
        at = ProviderEndpoint(base_url=provider.base_url, api="responses", api_key_env=None)
        other = at.model_copy(update={"headers": {"x-route": "none"}})
        capabilities = Capabilities(
            models={"listed": at, "unlisted": other},
            endpoint_rules={"listed": {"file_ids": ["file-mine"]}},
        )
        message = user_message(
            "read",
            image_part(file_id="file-mine"),
            image_part(file_id="file-victim"),
            file_part_from_id("file-mine"),
            file_part_from_id("file-victim"),
            file_part_from_url("http://127.0.0.1:9/secret.pdf"),
        )
        await run(temporal_env, task_queue, capabilities, "listed", message)
        await run(temporal_env, task_queue, capabilities, "unlisted", message)
    listed, unlisted = (body["input"][-1]["content"][1:] for body in provider.bodies())
    assert listed[0] == {"type": "input_image", "file_id": "file-mine", "detail": "auto"}
    assert listed[2] == {"type": "input_file", "file_id": "file-mine"}
    for part in (listed[1], listed[3], *unlisted[:4]):
        assert part["type"] == "input_text" and part["text"].endswith(ID_LEFT_OUT), part
    assert (
        listed[4]["text"]
        == unlisted[4]["text"]
        == ("[file omitted: this worker does not hand the model server that URL]")
    )
    assert "file-victim" not in str(provider.bodies())


def parts(messages: list[Message]) -> list[Any]:
    content = messages[0].content
    assert isinstance(content, list)
    return content


async def test_a_host_name_is_looked_up_once_per_request_and_every_address_counts() -> None:
    """Names are resolved by the injected check (here a table, no DNS): a public name
    goes, a name that resolves to a private address does not, and each host is asked
    about once however many parts name it; a data URL and a registered origin are not
    asked about at all."""
    asked: list[str] = []
    answers = {"images.example.com": True, "intranet.example.com": False, "server": True}

    async def public(url: str) -> bool:
        host = url.split("/")[2]
        asked.append(host)
        return answers[host]

    endpoint = ProviderEndpoint(base_url="http://server/v1", api_key_env=None)
    capabilities = Capabilities(models={"e": endpoint}, file_origins=["https://files.example"])
    guard = ProviderParts(capabilities, public)
    message = user_message(
        "look",
        image_part("https://images.example.com/a.png"),
        image_part("https://images.example.com/b.png"),
        image_part("https://intranet.example.com/c.png"),
        image_part("https://files.example/d.png"),
        image_part(PIXEL),
    )
    sent = await guard.guarded(PreparedMessages([message], None, 0), "e", endpoint)
    kept = [p.image_url.url if isinstance(p, ImagePart) and p.image_url else p for p in parts(sent)]
    assert kept[1:] == [
        "https://images.example.com/a.png",
        "https://images.example.com/b.png",
        TextPart(text=URL_LEFT_OUT),
        "https://files.example/d.png",
        PIXEL,
    ]
    assert asked == ["server", "images.example.com", "intranet.example.com"]
    assert not any(isinstance(p, FilePart) for p in parts(sent))


async def test_a_file_with_its_bytes_keeps_them_without_a_reference_it_may_not_send() -> None:
    """A part that carries its bytes and also an unlisted file id and a private URL
    goes with its bytes alone: the wire would send every field of the part."""

    async def public(url: str) -> bool:
        return "10.0.0.1" not in url

    endpoint = ProviderEndpoint(base_url="https://api.example/v1", api_key_env=None)
    guard = ProviderParts(
        Capabilities(models={"e": endpoint}, endpoint_rules={"e": {"only_file_origins": False}}),
        public,
    )
    data = "data:application/pdf;base64,JVBERi0="
    both = FilePart(
        file=FileData(file_data=data, file_id="file-victim", file_url="http://10.0.0.1/x.pdf")
    )
    sent = await guard.guarded(
        PreparedMessages([user_message("read", both)], None, 0), "e", endpoint
    )
    assert parts(sent)[1] == FilePart(file=FileData(file_data=data))


async def test_a_url_is_handed_on_only_as_the_worker_read_it() -> None:
    """A URL that another reader might read with another host is not handed on, even
    when the host this worker reads is public: a backslash before user info
    (``http://169.254.169.254\\@example.com/``: Python reads example.com, some HTTP
    clients the metadata address), user info, hosts written as numbers, spaces. One
    that is handed on is rebuilt from what was checked, never passed on as written."""
    asked: list[str] = []

    async def public(url: str) -> bool:  # every host public: only the reading decides
        asked.append(url)
        return True

    endpoint = ProviderEndpoint(base_url="https://api.example/v1", api_key_env=None)
    guard = ProviderParts(
        Capabilities(models={"e": endpoint}, endpoint_rules={"e": {"only_file_origins": False}}),
        public,
    )
    tricky = [
        "http://169.254.169.254\\@example.com/latest/meta-data/",
        "http://someone@example.com/a.png",
        "http://2852039166/latest/meta-data/",
        "http://0x7f.1/a.png",
        "http://0251.0376.0251.0376/a.png",
        "https://images.example.com/a b.png",
    ]
    plain = "https://Images.Example.com/p/../a.png#part"
    message = user_message("look", *(image_part(u) for u in [*tricky, plain]))
    sent = await guard.guarded(PreparedMessages([message], None, 0), "e", endpoint)
    kept = [p.image_url.url if isinstance(p, ImagePart) and p.image_url else p for p in parts(sent)]
    assert kept[1:] == [TextPart(text=URL_LEFT_OUT)] * len(tricky) + [
        "https://images.example.com/a.png"
    ]
    assert asked == ["https://images.example.com/a.png"]  # the rest were never asked about
