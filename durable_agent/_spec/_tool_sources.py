"""Where a spec's tools of other kinds come from: its ``toolsets``, each a source of one
kind of tool, by name (an MCP server, an OpenAPI service, or a source of a kind the
workers have). Each names what the worker registered (or, where the worker's policy
allows, gives it whole); the worker decides at admission. A kind's entries are its own
model: the built-in ``mcp`` and ``openapi`` kinds' are below, any other kind's is a
``ToolsetSpec``."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    model_serializer,
    model_validator,
)

from durable_agent._spec._spec_base import SpecModel as _Spec
from durable_agent._spec._tool_policy import APPROVAL_STRICTNESS, ApprovalMode

SOURCE_NAME = r"^[A-Za-z0-9_-]+$"


class _KindKept(_Spec):
    """An entry whose ``kind`` is written out even where defaults are left out: it is
    what a ``toolsets`` entry is read back by."""

    kind: str

    @model_serializer(mode="wrap")
    def _with_kind(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {"kind": self.kind, **data}


class McpServerSpec(_KindKept):
    """An MCP server whose tools the session may use. In a spec, usually just the
    ``name`` of a server the worker registered (the spec may narrow ``allowed_tools``,
    change ``prefix`` and make ``approval`` stricter). A server given whole is started
    over stdio (``command``) or reached over streamable HTTP (``url``): that is how a
    worker registers one, and a spec may do it only where the worker's policy allows
    (``SpecPolicy.inline_sources``). Its tool list is read once, at start."""

    kind: Literal["mcp"] = "mcp"
    name: str = Field(pattern=SOURCE_NAME)
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

    @property
    def listing_seconds(self) -> float:
        return self.timeout_seconds

    def given_whole(self) -> bool:
        return self.command is not None or self.url is not None

    def check_registrable(self) -> None:
        if not self.given_whole():
            raise ValueError(f"registered MCP server {self.name!r}: give command or url")


class OpenApiSpec(_KindKept):
    """An HTTP service described by an OpenAPI 3.0/3.1 document: one tool per operation
    (named by its ``operationId``). The document is read once, when the session starts.
    In a spec, usually just the ``name`` of a service the worker registered (the spec
    may narrow ``operations``, change ``prefix`` and make ``approval`` stricter)."""

    kind: Literal["openapi"] = "openapi"
    name: str = Field(pattern=SOURCE_NAME)
    document: str | None = Field(default=None, min_length=1)
    """Where the document is: an ``http(s)://`` URL or a file path on the workers (JSON or
    YAML). Unset: the registered service of this name. A spec gives one only where the
    worker's policy allows (``SpecPolicy.inline_sources``, ``worker_files``)."""
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

    @property
    def tool_prefix(self) -> str:
        return self.prefix

    @property
    def listing_seconds(self) -> float:
        return self.timeout_seconds

    def given_whole(self) -> bool:
        return self.document is not None

    def check_registrable(self) -> None:
        if not self.given_whole():
            raise ValueError(f"registered OpenAPI service {self.name!r}: give its document")


class ToolsetSpec(_Spec):
    """Tools of a kind the workers have (their ``Registry``), from one of that kind's
    sources, by name: the kind says which sources exist and what they hold, so a spec
    can only pick among what the worker's owner set up. Listed once, at start."""

    kind: str = Field(min_length=1)
    name: str = Field(pattern=SOURCE_NAME)
    """The source, as the kind knows it."""
    allowed_tools: list[str] | None = None
    """Only these of its tools, by their own names (unset: all of them)."""
    prefix: str | None = None
    """Put before each tool name (default ``<name>_``)."""

    @property
    def tool_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix

    @property
    def listing_seconds(self) -> float:
        return 60.0

    def given_whole(self) -> bool:
        return False

    def check_registrable(self) -> None:
        return None


def _entry_kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in ("mcp", "openapi") else "other"


Registrable = TypeVar("Registrable", McpServerSpec, OpenApiSpec)
"""A kind of source a worker's owner registers whole: an MCP server, an OpenAPI service."""

ToolSource = Annotated[
    Annotated[McpServerSpec, Tag("mcp")]
    | Annotated[OpenApiSpec, Tag("openapi")]
    | Annotated[ToolsetSpec, Tag("other")],
    Discriminator(_entry_kind),
]
"""One entry of a spec's ``toolsets``, read as its kind's model."""


def sources_from_old_fields(data: Any) -> Any:
    """A spec written with ``mcp_servers`` and ``openapi`` lists (every history recorded
    before toolsets holds that shape): their entries as ``toolsets`` of their kinds."""
    if not isinstance(data, dict) or not ({"mcp_servers", "openapi"} & data.keys()):
        return data
    data = dict(data)
    moved: list[Any] = []
    for field, kind in (("mcp_servers", "mcp"), ("openapi", "openapi")):
        for entry in data.pop(field, None) or []:
            if isinstance(entry, str):  # listed by name alone
                entry = {"name": entry}
            elif not isinstance(entry, dict):
                entry = entry.model_dump(exclude_unset=True)
            moved.append({**entry, "kind": kind})
    data["toolsets"] = [*moved, *(data.get("toolsets") or [])]
    return data


def narrowed(registered: Registrable, entry: Registrable) -> Registrable:
    """The source a worker's owner registered, with what a spec's entry naming it may
    choose: fewer tools (or operations), another prefix, a stricter approval. An entry
    that asks for more than the registered source has is ``ValueError``."""
    update: dict[str, object] = {}
    chosen = entry.model_fields_set
    if "prefix" in chosen:
        update["prefix"] = entry.prefix
    if "approval" in chosen and (
        APPROVAL_STRICTNESS[entry.approval] > APPROVAL_STRICTNESS[registered.approval]
    ):
        update["approval"] = entry.approval
    narrowing = "allowed_tools" if isinstance(entry, McpServerSpec) else "operations"
    wanted, own = getattr(entry, narrowing), getattr(registered, narrowing)
    if wanted is not None:
        beyond = sorted(set(wanted) - set(own)) if own is not None else []
        if beyond:
            raise ValueError(
                f"{registered.name!r}: {narrowing} {', '.join(beyond)} are not among those "
                f"this worker registered ({', '.join(own or [])})"
            )
        update[narrowing] = wanted
    return registered.model_copy(update=update)
