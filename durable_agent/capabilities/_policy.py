"""What a spec may carry besides names: the worker owner's choice, strict by default."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class SpecPolicy:
    """Kinds of field a session's spec may carry instead of naming what the worker
    registered. Each is off by default: whoever can start a session (any client of the
    namespace, the ``temporal`` CLI) is not trusted with the worker's machine. Turn them
    on only for local development, where the starter is the owner."""

    inline_endpoints: bool = False
    """Model endpoints given in the spec (a base URL and the variable holding its key)."""
    inline_mcp: bool = False
    """MCP servers given in the spec (a command to start, or a URL, and the variables
    passed to them)."""
    inline_openapi: bool = False
    """OpenAPI services given in the spec (a document URL, a base URL, header variables)."""
    file_documents: bool = False
    """OpenAPI documents read from a file path on the worker."""
    private_network: bool = False
    """URLs a spec carries may reach loopback, link-local and private addresses."""
    any_secret: bool = False
    """Any environment variable of the worker is a secret any tool may receive."""
    any_task_queue: bool = False
    """Tool calls may be routed to any task queue."""

    @classmethod
    def development(cls) -> SpecPolicy:
        """Everything allowed: the starter of a session is trusted as the worker's owner."""
        return cls(**{f.name: True for f in fields(cls)})

    def allowed(self) -> list[str]:
        """The kinds this policy lets a spec carry."""
        return [f.name for f in fields(self) if getattr(self, f.name)]

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
