"""What a worker lets sessions use, by name: model endpoints and their limits and prices,
tool sources, secrets, files by URL, the signing keys of approvers, and its policy for
what a spec may carry. A session's spec names these; the worker checks each name when
the session starts and again at every use."""

from durable_agent._contracts.approvals import ApproverKey
from durable_agent._spec.document import ModelPrice
from durable_agent._spec.endpoints import ProviderEndpoint, ProviderLimits

from ._config_file import load_capabilities
from ._registry import Capabilities, FileLimits, SecretGrant, SpecPolicy

__all__ = [
    "ApproverKey",
    "Capabilities",
    "FileLimits",
    "ModelPrice",
    "ProviderEndpoint",
    "ProviderLimits",
    "SecretGrant",
    "SpecPolicy",
    "load_capabilities",
]
