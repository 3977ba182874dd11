"""The agent spec: what a session asks for (model, tools, approval and tool policies,
endpoints and their limits), read strictly, and the kinds of tool it may name.

Pure (no temporalio, no HTTP client). Import each name from the module that defines it,
so that a process loads only what it uses. ``SpecModel``, below, is every part's base.

Its modules:

- ``document``: ``AgentSpec`` and its parts, what a session starts from, structured output.
- ``tools``: a tool's policy and call context, and where a spec's toolsets come from.
- ``tool_kinds``: ``ToolKind``: how a tool is found, recorded and run; the built-in kinds.
- ``approval_policy``: who decides a gated call: the spec's rules and argument tests.
- ``endpoints``: where a model lives, and the limits its owner shares out.
- ``secret_values``: ``{{secret:NAME}}`` references, and secret values taken out of text."""

from pydantic import BaseModel, ConfigDict


class SpecModel(BaseModel):
    """The base of every part of an agent spec: unknown fields are errors (a typo must
    not pass as a default), and a spec never changes once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)
