"""What a worker lets sessions use: its registries, its policy for what a spec may
carry, and the checks at a session's start and at every use."""

from durable_agent.capabilities.admission import admission_problems, registered_prices
from durable_agent.capabilities.policy import SpecPolicy
from durable_agent.capabilities.registry import Capabilities, SecretGrant
from durable_agent.capabilities.urls import UrlRefused, check_url
from durable_agent.errors import NotAllowed, NotRegistered

__all__ = [
    "Capabilities",
    "NotAllowed",
    "NotRegistered",
    "SecretGrant",
    "SpecPolicy",
    "UrlRefused",
    "admission_problems",
    "check_url",
    "registered_prices",
]
