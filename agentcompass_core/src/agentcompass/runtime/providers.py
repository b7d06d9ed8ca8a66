"""The old import path of :mod:`agentcompass.runtime.model_providers` (the public API for model providers)."""

from agentcompass.runtime.model_providers import (
    MASK,
    MIN_SECRET_LENGTH,
    ChatResponse,
    ModelClient,
    ModelError,
    ProviderSettings,
    Redactor,
    Usage,
    load_credentials,
    parse_value,
)

__all__ = ["MASK", "MIN_SECRET_LENGTH", "ChatResponse", "ModelClient", "ModelError", "ProviderSettings", "Redactor",
           "Usage", "load_credentials", "parse_value"]
