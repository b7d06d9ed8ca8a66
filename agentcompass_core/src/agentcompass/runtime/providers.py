"""The public API for model-provider plugins: the settings every factory receives, credentials, option values.

A provider factory (``register_models``) is called as ``factory(name, settings=settings, **options)`` with a
:class:`ProviderSettings`; the client it returns lists the values to mask in :attr:`ModelClient.secrets`.
"""

from agentcompass.models.settings import ProviderSettings, load_credentials, parse_value
from agentcompass.redaction import MASK
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError, Usage

__all__ = ["MASK", "ChatResponse", "ModelClient", "ModelError", "ProviderSettings", "Usage", "load_credentials",
           "parse_value"]
