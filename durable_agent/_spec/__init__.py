"""The agent spec: what a session asks for (model, tools, approval and tool policies,
endpoints and their limits), read strictly, and the kinds of tool it may name.

Pure (no temporalio, no HTTP client). Import each name from the module that defines it,
so that a process loads only what it uses."""

from pydantic import BaseModel, ConfigDict


class SpecModel(BaseModel):
    """The base of every part of an agent spec: unknown fields are errors (a typo must
    not pass as a default), and a spec never changes once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)
