"""The floor: the smallest hand-written Temporal agent loop, as most runtimes do it.
Every model call carries the whole array and the tool definitions."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._providers import shared_client
    from durable_agent._spec.endpoints import ProviderEndpoint
    from durable_agent._tools.registry import Registry
    from durable_agent._wire.codecs import build_request
    from durable_agent._wire.messages import (
        AssistantMessage,
        Message,
        ToolDefinition,
        ToolMessage,
        UserMessage,
    )


class FloorInput(BaseModel):
    endpoint: ProviderEndpoint
    model: str
    tools: list[ToolDefinition]
    prompt: str


class FloorModelCall(BaseModel):
    endpoint: ProviderEndpoint
    model: str
    tools: list[ToolDefinition]
    messages: list[Message]


class FloorToolCall(BaseModel):
    name: str
    arguments: str
    tool_call_id: str


@workflow.defn(name="FloorWorkflow")
class FloorWorkflow:
    @workflow.run
    async def run(self, request: FloorInput) -> int:
        messages: list[Message] = [UserMessage(content=request.prompt)]
        while True:
            reply: AssistantMessage = await workflow.execute_activity(
                "floor_call_model",
                FloorModelCall(
                    endpoint=request.endpoint,
                    model=request.model,
                    tools=request.tools,
                    messages=messages,
                ),
                result_type=AssistantMessage,
                start_to_close_timeout=timedelta(seconds=60),
            )
            messages.append(reply)
            if not reply.tool_calls:
                return len(messages)
            results = await asyncio.gather(
                *(
                    workflow.execute_activity(
                        "floor_run_tool",
                        FloorToolCall(
                            name=c.function.name, arguments=c.function.arguments, tool_call_id=c.id
                        ),
                        result_type=ToolMessage,
                        start_to_close_timeout=timedelta(seconds=60),
                    )
                    for c in reply.tool_calls
                )
            )
            messages.extend(results)


class FloorActivities:
    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    @activity.defn(name="floor_call_model")
    async def call_model(self, call: FloorModelCall) -> AssistantMessage:
        body = build_request(
            call.endpoint.api, call.messages, model=call.model, tools=call.tools, stream=True
        )
        return await shared_client().complete(call.endpoint, body)

    @activity.defn(name="floor_run_tool")
    async def run_tool(self, call: FloorToolCall) -> ToolMessage:
        found = self._registry.get(call.name)
        assert found is not None
        arguments = found.validate_arguments(call.arguments, {})
        output = await found.invoke(arguments, None)  # type: ignore[arg-type]
        return ToolMessage(tool_call_id=call.tool_call_id, content=str(output), tool_name=call.name)
