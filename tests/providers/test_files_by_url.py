"""A file a message gives by URL, to a model on Chat Completions (which takes files
inline or by id only): the worker fetches it from an origin its owner registered
(``Capabilities.file_origins``) and sends it inline; from anywhere else it makes no
request at all, and the model reads that the file was left out. The array keeps the
URL as it was given. Real HTTP on 127.0.0.1 for the files and the model."""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import file_part_from_url, user_message
from durable_agent.capabilities import Capabilities
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.support.agent_harness import running_worker, spec_for
from tests.support.file_origin import FileOrigin

PDF = b"%PDF-1.4 a small report"


@contextmanager
def file_server(redirect_to: str | None = None) -> Iterator[tuple[str, list[str]]]:
    """A file server on 127.0.0.1: ``/report.pdf`` (or a redirect), and the paths asked."""
    asked: list[str] = []

    class Files(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            if redirect_to is not None:
                self.send_response(302)
                self.send_header("Location", redirect_to)
                self.end_headers()
                return
            if self.path != "/report.pdf":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/pdf")
            self.send_header("Content-Length", str(len(PDF)))
            self.end_headers()
            self.wfile.write(PDF)

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


async def _ask(
    env: WorkflowEnvironment, task_queue: str, url: str, capabilities: Capabilities
) -> tuple[list[dict[str, Any]], list[Any]]:
    """Two turns about the file: the parts each request sent, and the array."""
    script = [assistant_text("a report"), assistant_text("still a report")]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, [], session={})
        async with running_worker(env, task_queue, Registry(), capabilities=capabilities) as c:
            agents = AgentClient(c, task_queue=task_queue)
            message = user_message("what is this?", file_part_from_url(url))
            sid = await agents.start(spec, message)
            await agents.session(sid).wait(timeout=60)
            cursor = await agents.session(sid).send("and again?")
            await agents.session(sid).wait(after=cursor, timeout=60)
            messages = await agents.session(sid).messages()
    sent = [r.body["messages"][0]["content"] for r in provider.requests]
    return sent, messages


async def test_a_file_from_a_registered_origin_goes_inline_fetched_once(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with FileOrigin(files={"/report.pdf": PDF}) as origin:
        base = origin.url
        allowed = Capabilities.development(file_origins=[base])
        sent, messages = await _ask(temporal_env, task_queue, f"{base}/report.pdf", allowed)
    inline = {
        "type": "file",
        "file": {
            "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode(),
            "filename": "report.pdf",
        },
    }
    assert [parts[1] for parts in sent] == [inline, inline]
    # fetched once; the second call asked whether it changed (its ETag: not modified)
    assert origin.paths() == ["/report.pdf", "/report.pdf"]
    assert origin.asked[0].if_none_match is None and origin.asked[1].if_none_match
    # the array keeps the file as the message gave it
    assert messages[0].content[1].file.file_url == f"{base}/report.pdf"


async def test_a_file_anywhere_else_is_never_fetched(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with file_server() as (base, asked), file_server() as (other, _):
        registered = Capabilities.development(file_origins=[other])
        sent, _ = await _ask(temporal_env, task_queue, f"{base}/report.pdf", registered)
    assert asked == [], "no request to an origin the owner did not register"
    assert all(parts[1]["type"] == "text" and "file omitted" in parts[1]["text"] for parts in sent)


async def test_a_redirect_off_the_registered_origin_is_not_followed(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with (
        file_server() as (elsewhere, reached),
        file_server(redirect_to=f"{elsewhere}/report.pdf") as (base, asked),
    ):
        allowed = Capabilities.development(file_origins=[base])
        sent, _ = await _ask(temporal_env, task_queue, f"{base}/report.pdf", allowed)
    assert asked and reached == [], "the redirect's target was never asked"
    assert "file omitted" in sent[0][1]["text"]
