"""What a worker lets sessions use, by name: model endpoints and their limits and prices,
tool sources, secrets, files by URL, the signing keys of approvers, memories and workspaces,
and its policy for what a spec may carry. A session's spec names these; the worker checks
each name when the session starts and again at every use.

Its modules:

- ``_registry``: ``Capabilities``, what a worker's owner registers, and ``SpecPolicy``.
- ``_config_file``: the same registries read from a TOML or JSON file (``--capabilities``).
- ``_admission``: a session's spec checked against the registries at its start.
- ``_urls``: which hosts a URL from outside may reach.
- ``_memory``: the memory tool kind (``Memory``, ``Embeddings``) and its namespaces.
- ``_memory_store``: where memories rest: SQLite or PostgreSQL, each with its full-text index.
- ``_memory_files``: Anthropic's memory tool served from the same store.
- ``_workspace``: a session's files and plan (``Workspace``), in the same store.

``RemoteAgent`` and ``RemoteAgents`` (remote A2A agents as tools) are the
``durable_agent._tools.a2a_agents`` kind's, named here with the owner's other
registrations."""

from durable_agent._contracts.approvals import ApproverKey
from durable_agent._spec.document import ModelPrice
from durable_agent._spec.endpoints import ProviderEndpoint, ProviderLimits
from durable_agent._tools.a2a_agents import RemoteAgent, RemoteAgents
from durable_agent._wire.options import ProviderCompaction

from ._config_file import load_capabilities
from ._memory import Embeddings, Memory, MemorySource
from ._registry import Capabilities, FileLimits, SecretGrant, SpecPolicy
from ._workspace import Workspace, WorkspaceLimits

__all__ = [
    "ApproverKey",
    "Capabilities",
    "Embeddings",
    "FileLimits",
    "Memory",
    "MemorySource",
    "ModelPrice",
    "ProviderCompaction",
    "ProviderEndpoint",
    "ProviderLimits",
    "RemoteAgent",
    "RemoteAgents",
    "SecretGrant",
    "SpecPolicy",
    "Workspace",
    "WorkspaceLimits",
    "load_capabilities",
]
