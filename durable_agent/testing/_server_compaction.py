"""What a provider's server does with its own compaction, for the test kit's models: the
Responses API's ``context_management`` compaction and Anthropic's context editing and
compaction, as they act on the wire.

A request is read as the server reads it: from the latest compaction item (Responses)
or block (Anthropic) on, what came before it dropped; old tool results cleared where
the request asks for ``clear_tool_uses_20250919`` and is past its trigger; and, past
the compaction threshold, a new item or block made, which the reply carries. Tokens are
counted at four characters each. ``ServerCompaction.serve`` says what the model read
(the parts, in order, for a prompt-cache model to bill), the item made and the edits
applied; ``ServerCompaction.reply`` puts them on a scripted reply, which the codec then
renders as the provider would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from durable_agent._wire.messages import AssistantMessage, CompactionPart, Usage

CHARS_PER_TOKEN = 4
#: What a cleared tool result reads as (the server's placeholder).
CLEARED = "[cleared to save context]"
#: The length of a compaction's content: a short summary of everything before it.
SUMMARY_CHARS = 1_200
#: What one answer of a scripted model costs in output tokens.
ANSWER_TOKENS = 30


def tokens_of(parts: list[str]) -> int:
    return sum(len(p) for p in parts) // CHARS_PER_TOKEN


@dataclass
class Served:
    """What the server did with one request."""

    parts: list[str]
    """What the model read, serialised, in order (tools and instructions first)."""
    marks: list[int] = field(default_factory=list)
    """The parts that carry a cache breakpoint (Anthropic's ``cache_control``)."""
    made: dict[str, Any] | None = None
    """The compaction item or block the server made for this request."""
    compacted: list[str] | None = None
    """What the compaction step read before (billed besides what the model read after)."""
    compacted_marks: list[int] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)
    """The context edits applied (Anthropic's ``applied_edits``)."""

    @property
    def input_tokens(self) -> int:
        return tokens_of(self.parts) + tokens_of(self.compacted or [])

    @property
    def output_tokens(self) -> int:
        """The answer's, and the summary's when the server compacted."""
        return ANSWER_TOKENS + (SUMMARY_CHARS // CHARS_PER_TOKEN if self.made else 0)


@dataclass
class ServerCompaction:
    """One provider's server (``api``: ``responses`` or ``anthropic``)."""

    api: str
    made: int = 0

    def serve(self, body: dict[str, Any]) -> Served:
        if self.api == "anthropic":
            return self._anthropic(body)
        return self._responses(body)

    def reply(self, message: AssistantMessage, served: Served) -> AssistantMessage:
        """``message`` as the reply to the request ``served`` read: the item or block the
        server made on it, and the usage it bills."""
        cleared = sum(int(e.get("cleared_input_tokens", 0)) for e in served.edits)
        uses = sum(int(e.get("cleared_tool_uses", 0)) for e in served.edits)
        usage = Usage(
            prompt_tokens=served.input_tokens,
            completion_tokens=served.output_tokens,
            total_tokens=served.input_tokens + served.output_tokens,
            cleared_input_tokens=cleared or None,
            cleared_tool_uses=uses or None,
        )
        part = CompactionPart(api=self.api, item=served.made) if served.made else None
        return message.model_copy(update={"usage": usage, "compaction": part})

    def _summary(self) -> str:
        self.made += 1
        return (f"compaction {self.made}: " + "the conversation so far, " * 60)[:SUMMARY_CHARS]

    # --- the Responses API -----------------------------------------------------------

    def _responses(self, body: dict[str, Any]) -> Served:
        items = list(body.get("input") or [])
        starts = [i for i, item in enumerate(items) if item.get("type") == "compaction"]
        if starts:
            items = items[starts[-1] :]  # the item stands for everything before it
        head = [json.dumps(body.get("tools") or []), str(body.get("instructions") or "")]
        parts = head + [json.dumps(item) for item in items]
        threshold = _responses_threshold(body)
        if threshold is None or tokens_of(parts) <= threshold:
            return Served(parts)
        made = {
            "type": "compaction",
            "id": f"cmp_{self.made + 1}",
            "encrypted_content": self._summary(),
        }
        return Served([*head, json.dumps(made)], made=made, compacted=parts)

    # --- Anthropic's Messages API ----------------------------------------------------

    def _anthropic(self, body: dict[str, Any]) -> Served:
        blocks: list[dict[str, Any]] = []
        for turn in body.get("messages") or []:
            blocks += [{**b, "role": turn["role"]} for b in turn["content"]]
        starts = [i for i, b in enumerate(blocks) if b.get("type") == "compaction"]
        if starts:
            blocks = blocks[starts[-1] :]  # the server drops what came before the block
        system = body.get("system") or ""
        tools = body.get("tools") or []
        head = [json.dumps(tools), json.dumps(system)]
        head_marks = [0] if any("cache_control" in t for t in tools) else []
        if isinstance(system, list) and any("cache_control" in b for b in system):
            head_marks.append(1)
        edits = (body.get("context_management") or {}).get("edits") or []
        applied: list[dict[str, Any]] = []
        for edit in edits:
            if edit.get("type") == "clear_tool_uses_20250919":
                blocks, done = _clear_tool_uses(head, blocks, edit)
                applied += [done] if done else []
        parts = head + [_plain(b) for b in blocks]
        marks = head_marks + [len(head) + i for i, b in enumerate(blocks) if "cache_control" in b]
        compact = next((e for e in edits if e.get("type") == "compact_20260112"), None)
        trigger = int(((compact or {}).get("trigger") or {}).get("value") or 150_000)
        if compact is None or tokens_of(parts) <= trigger:
            return Served(parts, marks, edits=applied)
        made = {"type": "compaction", "content": self._summary()}
        after = [*head, json.dumps({**made, "role": "assistant"})]
        return Served(
            after, head_marks, made, parts, compacted_marks=marks, edits=applied
        )


def _responses_threshold(body: dict[str, Any]) -> int | None:
    for entry in body.get("context_management") or []:
        if entry.get("type") == "compaction":
            return int(entry.get("compact_threshold") or 0)
    return None


def _plain(block: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in block.items() if k != "cache_control"})


def _clear_tool_uses(
    head: list[str], blocks: list[dict[str, Any]], edit: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Past the trigger, the oldest tool results replaced by the placeholder, all but the
    latest ``keep``, at least ``clear_at_least`` tokens of them when it clears."""
    trigger = int((edit.get("trigger") or {}).get("value") or 100_000)
    if tokens_of(head + [_plain(b) for b in blocks]) <= trigger:
        return blocks, None
    keep = int((edit.get("keep") or {}).get("value") or 3)
    least = int((edit.get("clear_at_least") or {}).get("value") or 0)
    results = [i for i, b in enumerate(blocks) if b.get("type") == "tool_result"]
    old = results[: max(0, len(results) - keep)]
    clearable = [i for i in old if blocks[i]["content"] != CLEARED]
    freed = sum(len(str(blocks[i]["content"])) - len(CLEARED) for i in clearable)
    if not clearable or freed // CHARS_PER_TOKEN < least:
        return blocks, None
    cleared = list(blocks)
    for i in clearable:
        cleared[i] = {**blocks[i], "content": CLEARED}
    done = {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": len(clearable),
        "cleared_input_tokens": freed // CHARS_PER_TOKEN,
    }
    return cleared, done
