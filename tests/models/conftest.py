"""Fixtures of the model-provider tests (helpers live in models_support.py)."""

from tests.models.models_support import _no_host_credentials, server  # noqa: F401
