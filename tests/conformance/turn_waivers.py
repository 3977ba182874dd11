"""TurnConformance vectors (or fields of them) we answer differently on purpose, with why."""

#: Vectors for behaviour not built yet, reported as skipped (never as passed): each is
#: a gap to close. Every vector runs today.
NOT_RUN: dict[str, str] = {}

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
