"""TurnConformance vectors (or fields of them) we answer differently on purpose, with why."""

NOT_RUN: dict[str, str] = {
    "guardrail_input_deny": "durable-agent has no input-guardrail hook; a session gates tool "
    "calls (approval policies), not user text.",
    "guardrail_output_deny": "durable-agent has no output-guardrail hook on final answers.",
    "cancellation_before_llm": "cancellation is Temporal's workflow cancellation and the "
    "end_session signal (sessions issue), not an in-loop cancel token.",
    "cancellation_between_iterations": "as cancellation_before_llm.",
    "cancellation_between_tools": "as cancellation_before_llm; tool batches are gated once "
    "and run as activities, which Temporal cancels.",
    "context_trim_basic": "durable-agent never trims or summarises the stored array: it is "
    "the replayable state and is kept whole.",
    "context_preserves_system_messages": "as context_trim_basic.",
}

FIELD_WAIVERS: dict[tuple[str, str], str] = {
    ("max_iterations_exceeded", "iterations"): "stop.max_turns=10 allows ten model calls and "
    "stops before an eleventh; the vector counts the refused eleventh as an iteration. The "
    "error text is still compared.",
    ("tool_not_registered_error", "error"): "an unknown tool name becomes an is_error tool "
    "result the model can read and recover from (it never crashes the loop); the test checks "
    "that result's text instead.",
    ("tool_not_registered_error", "error_type"): "as above.",
}

#: Fields about features durable-agent exposes differently (status query, activity summaries).
UNCHECKED_FIELDS = {"events", "notes", "rust_expected_error", "summary_contains"}
