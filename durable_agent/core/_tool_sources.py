"""Where a spec's remote tools come from: MCP servers, OpenAPI services and toolsets of
a registered kind. Each names what the worker registered (or, where the worker's policy
allows, gives it whole); the worker decides at admission."""

from __future__ import annotations

from pydantic import Field, model_validator

from ._spec_base import SpecModel as _Spec
from ._tool_policy import ApprovalMode


class McpServerSpec(_Spec):
    """An MCP server whose tools the session may use. In a spec, usually just the
    ``name`` of a server the worker registered (the spec may narrow ``allowed_tools``,
    change ``prefix`` and make ``approval`` stricter). A server given whole is started
    over stdio (``command``) or reached over streamable HTTP (``url``): that is how a
    worker registers one, and a spec may do it only where the worker's policy allows
    (``SpecPolicy.inline_mcp``). Its tool list is read once, at start."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    """Names of the worker's environment variables the server process gets."""
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP header -> the worker's environment variable that holds its value."""
    allowed_tools: list[str] | None = None
    """Only these of the server's tools (unset: all of them)."""
    prefix: str | None = None
    """Put before each tool name (default ``<name>_``, so two servers cannot collide)."""
    approval: ApprovalMode = "never"
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if self.command is not None and self.url is not None:
            raise ValueError(f"mcp server {self.name!r}: give command or url, not both")
        if self.command is None and self.url is None and (self.args or self.env or self.headers):
            raise ValueError(
                f"mcp server {self.name!r}: args, env and headers need a command or url"
            )
        return self

    @property
    def tool_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix


class OpenApiSpec(_Spec):
    """An HTTP service described by an OpenAPI 3.0/3.1 document: one tool per operation
    (named by its ``operationId``). The document is read once, when the session starts.
    In a spec, usually just the ``name`` of a service the worker registered (the spec
    may narrow ``operations``, change ``prefix`` and make ``approval`` stricter)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    document: str | None = Field(default=None, min_length=1)
    """Where the document is: an ``http(s)://`` URL or a file path on the workers (JSON or
    YAML). Unset: the registered service of this name. A spec gives one only where the
    worker's policy allows (``SpecPolicy.inline_openapi``, ``file_documents``)."""
    base_url: str | None = None
    """Where calls go (default: the document's first ``servers`` URL, resolved against
    the document's own URL)."""
    operations: list[str] | None = None
    """Only these ``operationId``s (unset: all of them)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP header -> the worker's environment variable that holds its value."""
    prefix: str = ""
    approval: ApprovalMode = "never"
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=3, ge=1)
    max_result_chars: int = Field(default=100_000, ge=100)


class ToolsetSpec(_Spec):
    """Tools of a kind registered on the workers (``register_tool_kind``), from one of
    that kind's sources, by name: the kind says which sources exist and what they hold,
    so a spec can only pick among what the worker's owner set up. Listed once, at start."""

    kind: str = Field(min_length=1)
    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    """The source, as the kind knows it."""
    allowed_tools: list[str] | None = None
    """Only these of its tools, by their own names (unset: all of them)."""
    prefix: str | None = None
    """Put before each tool name (default ``<name>_``)."""

    @property
    def tool_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix
