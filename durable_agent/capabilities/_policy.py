"""What a spec may carry besides names: the worker owner's choice, strict by default."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, fields

#: The kinds of tool source a spec can give whole: an MCP server (a command to run, or
#: a URL, with variables), an OpenAPI service (a document URL, a base URL, header
#: variables).
WHOLE_SOURCE_KINDS = ("mcp", "openapi")


@dataclass(frozen=True)
class SpecPolicy:
    """Kinds of field a session's spec may carry instead of naming what the worker
    registered. Each is off by default: whoever can start a session (any client of the
    namespace, the ``temporal`` CLI) is not trusted with the worker's machine. Turn them
    on only for local development, where the starter is the owner."""

    inline_endpoints: bool = False
    """Model endpoints given in the spec (a base URL and the variable holding its key)."""
    inline_sources: Collection[str] = field(default_factory=frozenset)
    """Kinds of tool source (a ``toolsets`` entry) given whole in the spec instead of
    naming one the worker registered: ``mcp`` (a command to start, or a URL, and the
    variables passed to them), ``openapi`` (a document URL, a base URL, header
    variables)."""
    worker_files: bool = False
    """Files on the worker a spec may name (an OpenAPI document's path)."""
    private_network: bool = False
    """URLs a spec carries may reach loopback, link-local and private addresses."""
    any_secret: bool = False
    """Any environment variable of the worker is a secret any tool may receive."""
    any_task_queue: bool = False
    """Tool calls may be routed to any task queue."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.inline_sources) - set(WHOLE_SOURCE_KINDS))
        if unknown:
            raise ValueError(
                f"inline_sources: {unknown[0]!r} is not a kind of source a spec can give "
                f"whole ({', '.join(WHOLE_SOURCE_KINDS)})"
            )
        object.__setattr__(self, "inline_sources", frozenset(self.inline_sources))

    @classmethod
    def development(cls) -> SpecPolicy:
        """Everything allowed: the starter of a session is trusted as the worker's owner."""
        flags = {f.name: True for f in fields(cls) if f.name != "inline_sources"}
        return cls(inline_sources=frozenset(WHOLE_SOURCE_KINDS), **flags)

    def gives_whole(self, kind: str) -> bool:
        """Whether a spec may give a source of ``kind`` whole."""
        return kind in self.inline_sources

    def allowed(self) -> list[str]:
        """What this policy lets a spec carry."""
        allowed = []
        for f in fields(self):
            if f.name == "inline_sources":
                allowed += [f"inline_{kind}" for kind in sorted(self.inline_sources)]
            elif getattr(self, f.name):
                allowed.append(f.name)
        return allowed

    def warning(self) -> str | None:
        """What a worker says loudly at start when it trusts specs with anything."""
        allowed = self.allowed()
        if not allowed:
            return None
        return (
            "WARNING: this worker lets session specs carry "
            + ", ".join(a.replace("_", " ") for a in allowed)
            + ". Whoever can start a session can then use this machine as its owner "
            "does. Use it for local development only."
        )
