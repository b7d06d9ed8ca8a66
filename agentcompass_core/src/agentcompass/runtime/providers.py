"""The public API for model-provider plugins: the settings every factory receives, credentials, option values.

A provider factory (``register_models``) is called as ``factory(name, settings=settings, **options)`` with a
:class:`ProviderSettings`; the client it returns lists the values to mask in :attr:`ModelClient.secrets`, and
may mask its own messages with a :class:`Redactor` (the one the runtime uses: a secret's encodings and the
pieces of it a cut leaves are masked too).
"""

from agentcompass.models.settings import ProviderSettings, load_credentials, parse_value
from agentcompass.redaction import MASK, MIN_SECRET_LENGTH, Redactor
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError, Usage

__all__ = ["MASK", "MIN_SECRET_LENGTH", "ChatResponse", "ModelClient", "ModelError", "ProviderSettings", "Redactor",
           "Usage", "load_credentials", "parse_value"]
