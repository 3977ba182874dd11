"""A web chat on a durable session: the gateway with its AI SDK door
(``/api/ai-sdk/chat``) and a small React page that uses the AI SDK's ``useChat``
(``examples/web_chat.jsx``, bundled by esbuild when the example starts). Ask it to clear
a cache and the page shows the call with Approve and Deny buttons; the tool runs only
when you approve. Reload the page: it loads the chat so far from the gateway
(``/api/ai-sdk/chat/{id}/messages``), a call still waiting among it. Stop the worker
mid-reply: the session goes on.

It runs with its own built-in model (no key, no network). The page needs the ``ai``
package, React and esbuild, which the tests install:

    npm ci --prefix tests/clients/ai_sdk
    python -m examples.web_chat            # then open http://127.0.0.1:8000/chat
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Route

from durable_agent import Agent, AgentClient, AgentSpec, AssistantMessage, ModelSpec, tool
from durable_agent.gateway import create_app
from durable_agent.testing import FunctionModel, ModelRequest, assistant_calls, assistant_text

PAGE_SOURCE = Path(__file__).with_name("web_chat.jsx")
#: Where ``npm ci --prefix tests/clients/ai_sdk`` puts the ai package, React and esbuild.
NODE_MODULES = Path(__file__).parents[1] / "tests" / "clients" / "ai_sdk" / "node_modules"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Web chat</title>
<style>
body { font: 15px system-ui, sans-serif; max-width: 42rem; margin: 2rem auto; }
.message[data-role=user] { text-align: right; }
.reasoning { color: #777; font-style: italic; }
.tool { border-left: 3px solid #ccc; padding-left: .5rem; }
</style></head>
<body><div id="root"></div><script type="module" src="/chat.js"></script></body></html>
"""


@tool(approval="always")
def wipe_cache(name: str) -> str:
    """Clear a cache (a person approves)."""
    return f"cache {name} cleared"


def built_in_model(request: ModelRequest) -> AssistantMessage:
    """The chat's model without a provider: asked to clear a cache, it thinks, then calls
    ``wipe_cache``; told what the call did, it says so; else it says what it heard."""
    messages: list[dict[str, Any]] = request.body["messages"]
    last = messages[-1]
    text = last["content"] if isinstance(last["content"], str) else ""
    if last["role"] == "tool":
        return assistant_text(f"Done: {text}")
    words = text.lower().split()
    if "clear" in words and "cache" in words:
        name = words[words.index("cache") - 1]
        call = assistant_calls(("wipe_cache", {"name": name}))
        return call.model_copy(update={"reasoning": f"the {name} cache needs a person's leave"})
    return assistant_text(f"You said: {text}")


def web_chat_agent(model: ModelSpec) -> Agent[str]:
    return Agent(
        name="web-chat",
        model=model,
        instructions="Help with the caches; clear one with wipe_cache when asked.",
        tools=[wipe_cache],
    )


def bundle(folder: Path, source: Path = PAGE_SOURCE) -> Path:
    """The page's script (``source``), bundled by esbuild into ``folder``; the page
    imports ``ai``, ``@ai-sdk/react`` and React from ``NODE_MODULES``."""
    esbuild = NODE_MODULES / ".bin" / "esbuild"
    if not esbuild.exists():
        sys.exit(
            "the page needs the ai package, React and esbuild: npm ci --prefix tests/clients/ai_sdk"
        )
    out = folder / "chat.js"
    subprocess.run(
        [
            str(esbuild),
            str(source),
            "--bundle",
            "--format=esm",
            "--jsx=automatic",
            "--minify",
            "--log-level=warning",
            '--define:process.env.NODE_ENV="production"',
            f"--outfile={out}",
        ],
        check=True,
        env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
    )
    return out


def web_chat_app(agents: AgentClient, spec: AgentSpec, script: Path) -> Starlette:
    """The gateway (its AI SDK door among its routes), with the page at ``/chat``: the
    page and the door share one origin, so the gateway's guard lets the page call it."""
    app = create_app(agents, spec)

    async def page(request: Request) -> Response:
        return HTMLResponse(PAGE)

    async def page_script(request: Request) -> Response:
        return FileResponse(script, media_type="text/javascript")

    app.router.routes += [Route("/chat", page), Route("/chat.js", page_script)]
    return app


async def main() -> None:
    import uvicorn

    from examples._running import running

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    port = parser.parse_args().port
    script = bundle(Path(mkdtemp()))
    with FunctionModel(built_in_model) as model:
        agent = web_chat_agent(ModelSpec(name="web-chat-model", endpoint=model.endpoint))
        async with running("web-chat", agents=[agent]) as client:
            app = web_chat_app(AgentClient(client, task_queue="web-chat"), agent.spec(), script)
            config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            print(f"open http://127.0.0.1:{port}/chat", flush=True)
            await uvicorn.Server(config).serve()


if __name__ == "__main__":
    asyncio.run(main())
