"""Replies that used a provider's hosted tools, as scripted turns: the scripted provider
renders each on the wire its request came on (a Responses ``web_search_call`` item, an
Anthropic ``server_tool_use`` block and its result), in the shapes the APIs document."""

from __future__ import annotations

from durable_agent._wire.messages import AssistantMessage, ProviderItems, ToolCall, Usage


def responses_searched(text: str, query: str, *, ident: str = "ws_1") -> AssistantMessage:
    """A Responses reply that searched the web for ``query`` and cites what it found."""
    call = {
        "type": "web_search_call",
        "id": ident,
        "status": "completed",
        "action": {"type": "search", "query": query},
    }
    cited = {
        "type": "url_citation",
        "url": "https://example.com/weather",
        "title": "Weather",
        "start_index": 0,
        "end_index": len(text),
    }
    said = {
        "type": "message",
        "id": f"msg_{ident}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": [cited]}],
    }
    return AssistantMessage(
        content=text,
        provider_items=ProviderItems(wire="responses", items=[call, said]),
        usage=Usage(prompt_tokens=20, completion_tokens=5, total_tokens=25),
    )


def anthropic_searched(
    text: str,
    query: str,
    *,
    ident: str = "srvtoolu_1",
    result_text: str = "Sunny all week.",
    calls: list[ToolCall] | None = None,
) -> AssistantMessage:
    """An Anthropic reply that ran ``web_search`` for ``query`` (one request, as its
    usage's ``server_tool_use`` counts it), then said ``text`` citing the result."""
    use = {"type": "server_tool_use", "id": ident, "name": "web_search", "input": {"query": query}}
    found = {
        "type": "web_search_tool_result",
        "tool_use_id": ident,
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.com/weather",
                "title": result_text,
                "encrypted_content": "EqgfCioIARgBIiQ3",
                "page_age": "1 day ago",
            }
        ],
    }
    cited = {
        "type": "text",
        "text": text,
        "citations": [
            {
                "type": "web_search_result_location",
                "url": "https://example.com/weather",
                "title": "Weather",
                "encrypted_index": "Eo8BCioIAhgBIiQy",
                "cited_text": result_text,
            }
        ],
    }
    return AssistantMessage(
        content=text,
        tool_calls=calls,
        provider_items=ProviderItems(wire="anthropic", items=[use, found, cited]),
        usage=Usage(
            prompt_tokens=30, completion_tokens=6, total_tokens=36, hosted_calls={"web_search": 1}
        ),
    )


def anthropic_paused(text: str, query: str, *, ident: str) -> AssistantMessage:
    """An Anthropic reply that searched for ``query`` and said ``text``, then paused its
    turn (``stop_reason`` ``pause_turn``): the client sends the request again with these
    blocks appended, and the model goes on."""
    searched = anthropic_searched(text, query, ident=ident, result_text=f"Found {query}.")
    return searched.model_copy(update={"finish_reason": "pause_turn"})
