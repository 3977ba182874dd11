"""A deterministic stand-in for a chat model, so the demo runs with no key and no network.

A ``FunctionModel`` (``durable_agent.testing``): it reads the Chat Completions request
it is sent (the same bytes a real provider gets) and answers the way a tool-using model
would: look up every city mentioned, in one parallel batch; then ask to send a report
(which needs a person's approval); then answer from the tool results.
"""

from __future__ import annotations

from typing import Any

from durable_agent._wire._messages import AssistantMessage
from durable_agent.testing import ModelRequest, assistant_calls, assistant_text

from ._demo_tools import WEATHER

DEMO_MODEL = "durable-agent-demo-model"
REPORT_TO = "you@example.com"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def demo_model_reply(request: ModelRequest) -> AssistantMessage:
    messages: list[dict[str, Any]] = request.body["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    question = _text(messages[last_user]["content"])
    since = messages[last_user + 1 :]
    results = [m for m in since if m["role"] == "tool"]
    cities = [city for city in WEATHER if city.lower() in question.lower()]
    if not cities:
        return assistant_text(
            "I can look up the weather in " + ", ".join(WEATHER) + " and email you a report."
        )
    if not results:
        return assistant_calls(*[("get_weather", {"city": city}) for city in cities])
    weather = "; ".join(
        f"{city}: {result['content']}" for city, result in zip(cities, results, strict=False)
    )
    if len(results) == len(cities):
        return assistant_calls(("send_report", {"to": REPORT_TO, "text": f"Weather: {weather}"}))
    report = results[-1]
    if "denied" in _text(report["content"]).lower():
        return assistant_text(f"Weather: {weather}. I did not send the report: {report['content']}")
    return assistant_text(f"Weather: {weather}. The report went to {REPORT_TO}.")
