"""What a long session costs: the share of its input tokens a provider serves from its
prompt cache, and the bill at list prices.

    ./run bench-cost [--turns 100,1000] [--budget 6000]
    ./run bench-cost --strategies [--turns 1000] [--threshold 6000]   # whose compaction

One session per wire API (Chat Completions, Anthropic) runs through the real workflow
and worker, against a fresh dev server: each turn a question, a tool call whose result
is about 1.5 KB of text, and an answer, over a context budget. The model is a double
that applies each API's caching rules to the requests it is sent and reports usage as
the provider does:

- **Chat Completions** (OpenAI's automatic caching): a request's prefix shared with
  an earlier request of the same ``prompt_cache_key`` is served from the cache once
  it is at least 1,024 tokens, in steps of 128.
- **Anthropic**: a request reads the longest prefix, ending at one of its block
  boundaries within 20 blocks before a ``cache_control`` breakpoint, that an earlier
  request wrote; it writes the prefixes up to its own breakpoints.

A session that compacts past its budget (``when_over: compact``, its summaries written
by the double) runs the same way. The same conversation is then priced, with the same
caching rules, as other windows would have sent it: the sliding window this project
had before (each request leaving out just enough of the oldest exchanges), and the
peers' defaults as their docs set them up (the whole history each request: the OpenAI
Agents SDK's sessions and Pydantic AI's message history; LangGraph's
``trim_messages(strategy="last")`` before each call, a sliding window). Tokens are
estimated at four characters each.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.run import dev_server
from durable_agent._client.sessions import AgentClient
from durable_agent._observability.logs import configure_logging
from durable_agent._spec.document import AgentInput, AgentSpec, ModelPrice
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import built_in_codec, reply_body_of
from durable_agent._wire.context import ContextRules, is_summary
from durable_agent._wire.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    parse_messages,
)
from durable_agent._wire.options import (
    ClearToolUses,
    CompactionStrategy,
    ModelOptions,
    ProviderCompaction,
)
from durable_agent._wire.outgoing import prepare_request_messages
from durable_agent.capabilities import Capabilities
from durable_agent.temporal import build_worker
from durable_agent.testing import ScriptedProvider, assistant_calls
from durable_agent.testing import assistant_text as text_reply
from durable_agent.testing._in_process import InProcessRun
from durable_agent.testing._scripted_provider import RecordedRequest, Reply
from durable_agent.testing._server_compaction import ServerCompaction

#: The models' context windows (tokens): a request past it is refused by the provider.
CONTEXT_WINDOWS = {"chat": 128_000, "responses": 128_000, "anthropic": 200_000}
#: List prices, US dollars per million tokens (input, cached input, cache write, output).
PRICES = {
    "chat": ModelPrice(
        input_per_million=2.5,
        cached_input_per_million=1.25,
        output_per_million=10.0,
    ),  # gpt-4o
    "responses": ModelPrice(
        input_per_million=2.5,
        cached_input_per_million=1.25,
        output_per_million=10.0,
    ),  # gpt-4o
    "anthropic": ModelPrice(
        input_per_million=3.0,
        cached_input_per_million=0.30,
        cache_write_per_million=3.75,
        output_per_million=15.0,
    ),  # Claude Sonnet
}
CHARS_PER_TOKEN = 4
OPENAI_MIN_TOKENS, OPENAI_STEP = 1024, 128
ANTHROPIC_LOOKBACK = 20


@tool
def fetch_record(turn: int) -> str:
    """A record of about 1.5 KB, as a lookup tool returns it."""
    line = f"record {turn}: status shipped, carrier DHL, weight 2.4 kg, notes none. "
    return (line * 20)[:1500]


def tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN


@dataclass
class Bill:
    """What the double billed: input tokens, of which cached reads and cache writes."""

    requests: int = 0
    over_context_from: int | None = None
    """The first request past the model's context window (the provider refuses it)."""
    input: int = 0
    cached: int = 0
    written: int = 0
    output: int = 0

    def add(self, prompt: int, cached: int, written: int, output: int, api: str) -> None:
        self.requests += 1
        if prompt > CONTEXT_WINDOWS[api] and self.over_context_from is None:
            self.over_context_from = self.requests
        self.input += prompt
        self.cached += cached
        self.written += written
        self.output += output

    def share(self) -> float:
        return self.cached / self.input if self.input else 0.0

    def cost(self, api: str) -> float:
        from durable_agent._wire.messages import Usage

        usage = Usage(
            prompt_tokens=self.input,
            completion_tokens=self.output,
            cached_tokens=self.cached,
            cache_write_tokens=self.written,
        )
        return PRICES[api].cost_usd(usage)


@dataclass
class OpenAiCache:
    """Recent requests, per cache key: a request's longest shared prefix is served."""

    seen: dict[str, list[list[str]]] = field(default_factory=dict)

    def serve(self, key: str, serialised: list[str]) -> int:
        """Cached tokens of a request whose parts (tools, then messages) are given."""
        best = 0
        for earlier in self.seen.get(key, []):
            shared = 0
            for mine, theirs in zip(serialised, earlier, strict=False):
                if mine != theirs:
                    shared += _common_chars(mine, theirs)
                    break
                shared += len(mine)
            best = max(best, shared)
        recent = self.seen.setdefault(key, [])
        recent.append(serialised)
        del recent[:-4]  # the recent requests of the key
        cached = tokens(best)
        if cached < OPENAI_MIN_TOKENS:
            return 0
        return cached - cached % OPENAI_STEP


def _common_chars(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class AnthropicCache:
    """Prefix digests written at breakpoints: read at block boundaries."""

    written: set[str] = field(default_factory=set)

    def serve(self, blocks: list[str], breakpoints: list[int]) -> tuple[int, int]:
        """Cached reads and cache writes (tokens) of a request of ``blocks`` (each block
        serialised, in order) with breakpoints after the given block indices."""
        prefix_chars = [0]
        digests = [hashlib.sha256()]
        for block in blocks:
            prefix_chars.append(prefix_chars[-1] + len(block))
            digest = digests[-1].copy()
            digest.update(block.encode())
            digests.append(digest)
        read = 0
        for point in breakpoints:
            for end in range(point + 1, max(0, point + 1 - ANTHROPIC_LOOKBACK), -1):
                if digests[end].hexdigest() in self.written:
                    read = max(read, prefix_chars[end])
                    break
        last = breakpoints[-1] + 1 if breakpoints else 0
        for point in breakpoints:
            self.written.add(digests[point + 1].hexdigest())
        write = max(0, prefix_chars[last] - read)
        return tokens(read), tokens(write)


class CachingModel:
    """The model double: answers each turn (a call of ``fetch_record``, then an answer),
    and bills each request by its API's caching rules."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.bill = Bill()
        self.openai = OpenAiCache()
        self.anthropic = AnthropicCache()
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply | AssistantMessage:
        body = request.body
        with self._lock:
            reply = self._answer(body)
            usage = self._usage(body)
        return self._reply(reply, usage)

    def _answer(self, body: dict[str, Any]) -> AssistantMessage:
        if not body.get("tools"):  # a compaction's request for a summary
            return text_reply(
                "Earlier, the user asked where the parcels of their orders were; each had "
                "shipped with DHL and weighed 2.4 kg."
            )
        messages = body["messages"]
        last = messages[-1]
        if self.api == "anthropic":
            kinds = [b.get("type") for b in last["content"]] if last["role"] == "user" else []
            after_tool = "tool_result" in kinds
            asked = " ".join(b.get("text", "") for b in last["content"] if b.get("type") == "text")
        else:
            after_tool = last["role"] == "tool"
            asked = str(last.get("content"))
        if after_tool:
            return text_reply("Record read: the parcel shipped with DHL and weighs 2.4 kg.")
        turn = int(asked.split()[1].rstrip(":")) if asked.startswith("question") else 0
        return assistant_calls(("fetch_record", {"turn": turn}))

    def _usage(self, body: dict[str, Any]) -> dict[str, Any]:
        output = 30
        if self.api == "anthropic":
            blocks, breakpoints = _anthropic_blocks(body)
            read, write = self.anthropic.serve(blocks, breakpoints)
            prompt = tokens(sum(len(b) for b in blocks))
            self.bill.add(prompt, read, write, output, self.api)
            fresh = max(0, prompt - read - write)
            return {
                "input_tokens": fresh,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": write,
                "output_tokens": output,
            }
        parts = [json.dumps(body.get("tools") or [])] + [json.dumps(m) for m in body["messages"]]
        prompt = tokens(sum(len(p) for p in parts))
        cached = self.openai.serve(body.get("prompt_cache_key") or "", parts)
        self.bill.add(prompt, cached, 0, output, self.api)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def _reply(self, message: AssistantMessage, usage: dict[str, Any]) -> Reply:
        from durable_agent.testing._scripted_provider import json_reply

        if self.api == "anthropic":
            content: list[dict[str, Any]] = []
            if message.content:
                content.append({"type": "text", "text": message.content})
            for call in message.tool_calls or []:
                content.append(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.function.name,
                        "input": json.loads(call.function.arguments),
                    }
                )
            stop = "tool_use" if message.tool_calls else "end_turn"
            body = {
                "id": f"msg_{uuid.uuid4().hex[:8]}",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": content,
                "stop_reason": stop,
                "usage": usage,
            }
            return json_reply(body)
        from durable_agent.testing._scripted_provider import chat_completion_body

        answer = chat_completion_body(message)
        answer["usage"] = usage
        return json_reply(answer)


def _anthropic_blocks(body: dict[str, Any]) -> tuple[list[str], list[int]]:
    """The request as the cache sees it: tools, system, then each message's blocks, in
    order, and the indices of the blocks that carry a breakpoint."""
    blocks: list[dict[str, Any]] = [*(body.get("tools") or [])]
    system = body.get("system") or []
    blocks += [{"type": "text", "text": system}] if isinstance(system, str) else system
    for turn in body["messages"]:
        blocks += [{**b, "role": turn["role"]} for b in turn["content"]]
    marks = [i for i, b in enumerate(blocks) if "cache_control" in b]
    clean = [json.dumps({k: v for k, v in b.items() if k != "cache_control"}) for b in blocks]
    return clean, marks


async def run_session(
    client: Any, api: str, turns: int, budget: int, when_over: str = "trim"
) -> tuple[Bill, list[Message]]:
    """One session of ``turns`` turns through the worker; the double's bill and the
    session's array."""
    model = CachingModel(api)
    queue = f"cost-{uuid.uuid4().hex[:8]}"
    with ScriptedProvider(responder=model, keep_requests=False) as provider:
        endpoint = ProviderEndpoint(api=api, base_url=provider.base_url, api_key_env=None)
        context = ContextRules.model_validate({"budget_tokens": budget, "when_over": when_over})
        spec = AgentSpec.model_validate(
            {
                "model": {
                    "name": "claude" if api == "anthropic" else "gpt-4o",
                    "endpoint": "double",
                    "stream": False,
                    "context": context.model_dump(),
                    "options": ModelOptions(prompt_cache=True).model_dump(exclude_none=True),
                },
                "instructions": "You look records up and answer in one sentence.",
                "tools": ["fetch_record"],
            }
        )
        async with build_worker(
            client,
            task_queue=queue,
            registry=Registry([fetch_record]),
            preload_tokenizers=False,
            capabilities=Capabilities(models={"double": endpoint}),
        ):
            agents = AgentClient(client, task_queue=queue)
            session = agents.session(await agents.start(spec, _question(0)))
            await session.wait(timeout=120)
            for turn in range(1, turns):
                after = (await session.status()).message_count
                await session.send(_question(turn))
                await session.wait(after=after, timeout=120)
            messages = await session.messages()
            await session.end()
    return model.bill, messages


def _question(turn: int) -> str:
    return f"question {turn}: where is the parcel of order {turn}, and what does it weigh?"


# --- the same conversation, as other windows would have sent it ----------------------


def requests_of(messages: Sequence[Message]) -> list[list[Message]]:
    """The array at each model call: after each user message and each tool result."""
    points = [i + 1 for i, m in enumerate(messages) if isinstance(m, UserMessage | ToolMessage)]
    return [list(messages[:end]) for end in points]


def sliding(window: list[Message], budget: int) -> list[Message]:
    """The window as this project cut it before: just enough of the oldest exchanges
    left out, each request (an assistant turn leaves with its results)."""
    units = [len(json.dumps(m.model_dump(exclude_none=True))) for m in window]
    total = sum(units)
    latest = max(i for i, m in enumerate(window) if isinstance(m, UserMessage))
    kept, index = list(window), 0
    while tokens(total) > budget:
        while index < latest and isinstance(kept[index], SystemMessage):
            index += 1
        if index >= latest:
            break
        end = index + 1
        if isinstance(kept[index], AssistantMessage):
            while end < latest and isinstance(kept[end], ToolMessage):
                end += 1
        total -= sum(units[index:end])
        del kept[index:end], units[index:end]
        latest -= end - index
    return kept


def whole(window: list[Message], budget: int) -> list[Message]:
    """The whole history, each request (what the peers' sessions send by default)."""
    return window


def last_from_human(window: list[Message], budget: int) -> list[Message]:
    """LangGraph's ``trim_messages(strategy="last", max_tokens=budget, start_on="human",
    include_system=True)``: the newest messages that fit, starting at a user message."""
    system = [m for m in window if isinstance(m, SystemMessage)]
    capacity = budget - sum(
        tokens(len(json.dumps(m.model_dump(exclude_none=True)))) for m in system
    )
    kept: list[Message] = []
    for message in reversed([m for m in window if not isinstance(m, SystemMessage)]):
        size = tokens(len(json.dumps(message.model_dump(exclude_none=True))))
        if size > capacity:
            break
        capacity -= size
        kept.insert(0, message)
    while kept and not isinstance(kept[0], UserMessage):
        kept.pop(0)
    return system + kept


#: A way of shaping a request's window: the array, the budget -> the messages sent.
Window = Callable[[list[Message], int], list[Message]]


def priced(api: str, messages: Sequence[Message], window: Window, budget: int) -> Bill:
    """The conversation's requests, each as ``window`` shapes it, billed by the API's
    caching rules (the cache fields asked for, as each peer can)."""
    from durable_agent._wire.codecs import build_request
    from durable_agent._wire.messages import ToolDefinition

    model = CachingModel(api)
    tools = [
        ToolDefinition(
            name="fetch_record",
            description="A record.",
            parameters={"type": "object", "properties": {"turn": {"type": "integer"}}},
        )
    ]
    for request in requests_of(messages):
        shaped = prepare_request_messages(window(request, budget))
        body = build_request(
            api,
            shaped,
            model="m",
            tools=tools,
            options=ModelOptions(prompt_cache_key="k"),
        )
        model._usage(body)
    return model.bill


# --- whose compaction: the project's own, the provider's, or both ---------------------
#
# The same 1.5 KB-a-turn conversation on the Responses API and on Anthropic's, once per
# strategy the endpoint's owner can choose. The session runs in this process
# (``InProcessRun``: the Session's own rules, and each request built by the worker's
# request builder), without the Temporal server: a thousand turns a strategy take
# seconds. The double acts as the provider's server does (``ServerCompaction``): it
# drops what comes before a compaction item or block, clears old tool results where
# Anthropic's context editing asks it to, compacts past the threshold, and bills what
# the model read by the API's prompt-cache rules, the compaction step's read included.

#: Each API's rows: the strategy, and whether Anthropic's server also clears old tool
#: results (context editing, past half the threshold, keeping three, at least 2,000
#: tokens at a time so that the cache it breaks is broken for something).
STRATEGY_ROWS: dict[str, list[tuple[CompactionStrategy, bool]]] = {
    "responses": [("own", False), ("provider", False), ("both", False)],
    "anthropic": [("own", False), ("provider", False), ("both", False), ("provider", True)],
}


def strategy_settings(
    strategy: CompactionStrategy, threshold: int, clearing: bool
) -> ProviderCompaction:
    """The owner's settings for a row."""
    clear = None
    if clearing:
        clear = ClearToolUses(trigger_tokens=threshold // 2, keep=3, clear_at_least_tokens=2_000)
    return ProviderCompaction(strategy=strategy, threshold_tokens=threshold, clear_tool_uses=clear)


def strategy_context(strategy: CompactionStrategy, budget: int) -> ContextRules | None:
    """The spec's own rules for a row: own compaction past the budget; with both, the
    budget is a backstop above the provider's threshold; with the provider's alone,
    none."""
    if strategy == "provider":
        return None
    backstop = budget if strategy == "own" else budget * 2
    return ContextRules(budget_tokens=backstop, when_over="compact")


class ProviderDouble:
    """The provider's server for one strategy row: answers as ``CachingModel`` does, and
    compacts and bills as ``ServerCompaction`` says, through the codec's wire."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.server = ServerCompaction(api)
        self.bill = Bill()
        self.openai = OpenAiCache()
        self.anthropic = AnthropicCache()
        self.compactions = 0
        self.cleared = 0

    def __call__(self, body: dict[str, Any]) -> AssistantMessage:
        answer = self._answer(body)
        served = self.server.serve(body)
        cached = 0
        reads = [(served.compacted, served.compacted_marks), (served.parts, served.marks)]
        for parts, marks in reads:
            if parts is None:
                continue
            if self.api == "anthropic":
                read, write = self.anthropic.serve(parts, marks or [len(parts) - 1])
                cached += read
                self.bill.written += write
            else:
                cached += self.openai.serve(str(body.get("prompt_cache_key") or ""), parts)
        self.bill.add(served.input_tokens, cached, 0, served.output_tokens, self.api)
        self.compactions += served.made is not None
        self.cleared += sum(int(e.get("cleared_input_tokens", 0)) for e in served.edits)
        codec = built_in_codec(self.api)
        reply = reply_body_of(codec, self.server.reply(answer, served)) or {}
        return codec.parse_response(reply)

    def _answer(self, body: dict[str, Any]) -> AssistantMessage:
        if not body.get("tools"):  # the session's own compaction asks for a summary
            return text_reply("Earlier, the user asked where parcels were; all shipped with DHL.")
        if self.api == "anthropic":
            last = body["messages"][-1]
            after_tool = any(b.get("type") == "tool_result" for b in last["content"])
        else:
            after_tool = body["input"][-1].get("type") == "function_call_output"
        if after_tool:
            return text_reply("Record read: the parcel shipped with DHL and weighs 2.4 kg.")
        return assistant_calls(("fetch_record", {"turn": self.bill.requests}))


async def strategy_session(
    api: str,
    turns: int,
    strategy: CompactionStrategy,
    budget: int,
    threshold: int,
    clearing: bool = False,
) -> tuple[ProviderDouble, int]:
    """One session of ``turns`` turns under ``strategy``: the double (its bill) and the
    session's own summaries."""
    double = ProviderDouble(api)
    endpoint = ProviderEndpoint(
        api=api,
        base_url="http://127.0.0.1:9/v1",
        api_key_env=None,
        compaction=strategy_settings(strategy, threshold, clearing),
    )
    context = strategy_context(strategy, budget)
    spec = AgentSpec.model_validate(
        {
            "model": {
                "name": "claude" if api == "anthropic" else "gpt-4o",
                "endpoint": "double",
                "stream": False,
                **({"context": context.model_dump()} if context else {}),
                "options": ModelOptions(prompt_cache=True).model_dump(exclude_none=True),
            },
            "instructions": "You look records up and answer in one sentence.",
            "tools": ["fetch_record"],
        }
    )
    asked = [1]

    def next_question(run: InProcessRun) -> None:
        # the answer is in and the session would wait next: a person asks again
        last = run.session.messages[-1]
        if isinstance(last, AssistantMessage) and not last.tool_calls and asked[0] < turns:
            run.send(_question(asked[0]))
            asked[0] += 1

    run = InProcessRun(
        spec=spec,
        registry=Registry([fetch_record]),
        model=double,
        between_commands=next_question,
        continue_as_new_every=500,
        capabilities=Capabilities(models={"double": endpoint}),
    )
    await run.run(AgentInput(spec=spec, message=_question(0)))
    summaries = sum(1 for m in run.session.messages if is_summary(m))
    return double, summaries


async def strategies(turns: int, budget: int, threshold: int) -> None:
    print(
        f"\n{turns} turns, own budget {budget} tokens (both: {budget * 2} as a backstop), "
        f"provider threshold {threshold} tokens, 1.5 KB tool results"
    )
    print(
        f"{'API':<10} {'strategy':<20} {'requests':>8} {'input tokens':>13} {'cached':>7} "
        f"{'cost USD':>9} {'provider compactions':>21} {'own summaries':>14} {'cleared':>8}"
    )
    for api, rows in STRATEGY_ROWS.items():
        for strategy, clearing in rows:
            double, summaries = await strategy_session(
                api, turns, strategy, budget, threshold, clearing
            )
            bill = double.bill
            name = strategy + (" + clearing" if clearing else "")
            print(
                f"{api:<10} {name:<20} {bill.requests:>8} {bill.input:>13,} "
                f"{bill.share():>7.3f} {bill.cost(api):>9.3f} {double.compactions:>21} "
                f"{summaries:>14} {double.cleared:>8,}"
            )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", default="100,1000")
    parser.add_argument("--budget", type=int, default=6000)
    parser.add_argument(
        "--compaction-only",
        action="store_true",
        help="run only the sessions that compact (when_over: compact) past the budget",
    )
    parser.add_argument("--skip-compaction", action="store_true", help="run no compacting session")
    parser.add_argument(
        "--strategies",
        action="store_true",
        help="compare whose compaction runs (own, provider, both) on Responses and Anthropic",
    )
    parser.add_argument("--threshold", type=int, default=6000)
    args = parser.parse_args()
    budget = args.budget
    configure_logging("warning")
    if args.strategies:
        for turns in [int(t) for t in args.turns.split(",")]:
            await strategies(turns, budget, args.threshold)
        return
    async with dev_server() as (_, client):
        for turns in [int(t) for t in args.turns.split(",")]:
            print(f"\n{turns} turns, a {budget}-token budget, 1.5 KB tool results")
            print(f"{'API':<10} {'window':<44} {'requests':>8} {'cached':>7} {'cost USD':>9}  note")
            for api in ("chat", "anthropic"):
                if not args.skip_compaction:
                    compacted, _ = await run_session(client, api, turns, budget, "compact")
                    row = "durable-agent: compaction (the workflow)"
                    print(
                        f"{api:<10} {row:<44} {compacted.requests:>8} {compacted.share():>7.3f} "
                        f"{compacted.cost(api):>9.3f}"
                    )
                if args.compaction_only:
                    continue
                bill, messages = await run_session(client, api, turns, budget)
                rows = [("durable-agent: stable window (the workflow)", bill)]
                array = parse_messages([m.model_dump(mode="json") for m in messages])
                others: list[tuple[str, Window]] = [
                    ("durable-agent before: sliding window", sliding),
                    ("OpenAI Agents SDK, Pydantic AI: whole history", whole),
                    ("LangGraph trim_messages(strategy=last)", last_from_human),
                ]
                rows += [(name, priced(api, array, shape, budget)) for name, shape in others]
                for name, bill_of in rows:
                    over = bill_of.over_context_from
                    note = f"past the {CONTEXT_WINDOWS[api]:,}-token context from request {over}"
                    print(
                        f"{api:<10} {name:<44} {bill_of.requests:>8} {bill_of.share():>7.3f} "
                        f"{bill_of.cost(api):>9.3f}  {note if over else ''}".rstrip()
                    )


if __name__ == "__main__":
    asyncio.run(main())
