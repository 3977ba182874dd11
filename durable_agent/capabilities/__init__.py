"""What a worker lets sessions use: its registries, its policy for what a spec may
carry, and the checks at a session's start and at every use."""

from durable_agent.core import NotAllowed, NotRegistered

from ._admission import admission_problems, registered_prices
from ._config_file import CapabilitiesFileError, load_capabilities
from ._policy import SpecPolicy
from ._registry import Capabilities, FileLimits, SecretGrant
from ._urls import UrlRefused, check_url

__all__ = [
    "Capabilities",
    "CapabilitiesFileError",
    "FileLimits",
    "NotAllowed",
    "NotRegistered",
    "SecretGrant",
    "SpecPolicy",
    "UrlRefused",
    "admission_problems",
    "check_url",
    "load_capabilities",
    "registered_prices",
]
