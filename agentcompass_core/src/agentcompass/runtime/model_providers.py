r"""The public API for model-provider plugins: the settings every factory receives, credentials, option values.

A provider factory (``register_models``) is called as ``factory(name, settings=settings, **options)`` with a
:class:`ProviderSettings` built from the run request (``--model-base-url``, ``--model-api-key-env``,
``--max-retries``, ``--max-connections``, ``--request-timeout``), beside the model name and the
``--model-arg``\ s. The client it returns (a :class:`~agentcompass.runtime.models.ModelClient`) lists the values
to mask in ``ModelClient.secrets``, and may mask its own messages with a :class:`Redactor` (the one the runtime
uses: a secret's encodings and the pieces of it a cut leaves are masked too).

Credentials never travel in the request: providers read them from environment variables or from the
credentials file (``$AGENTCOMPASS_CREDENTIALS``, default ``~/.config/agentcompass/credentials.toml``)::

    [openai]
    api_key = "sk-..."

    [anthropic]
    api_key = "sk-ant-..."

    [openai-compatible]
    base_url = "http://127.0.0.1:8000/v1"
    api_key = "token-for-my-vllm"

An environment variable always wins over the file.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from agentcompass.errors import UsageError
from agentcompass.redaction import MASK, MIN_SECRET_LENGTH, Redactor
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError, Usage
from agentcompass.runtime.types import RunRequest

__all__ = ["CREDENTIALS_ENV", "DEFAULT_CREDENTIALS", "MASK", "MIN_SECRET_LENGTH", "ChatResponse", "ModelClient",
           "ModelError", "ProviderSettings", "Redactor", "Usage", "load_credentials", "parse_value",
           "settings_from_request"]

CREDENTIALS_ENV = "AGENTCOMPASS_CREDENTIALS"
DEFAULT_CREDENTIALS = Path("~/.config/agentcompass/credentials.toml")


#: The request's defaults: the one place the knobs' defaults are written (CLI options and settings read them).
_DEFAULTS = RunRequest(benchmark="", harness="", model="")


@attrs.frozen
class ProviderSettings:
    """How a provider reaches its endpoint. Holds no secret: only the *name* of the key's variable."""

    base_url: str | None = None
    api_key_env: str | None = None
    max_retries: int = _DEFAULTS.models.max_retries
    max_connections: int = _DEFAULTS.models.max_connections
    request_timeout: float = _DEFAULTS.models.request_timeout
    #: Environment to read variables from (tests pass their own); None means ``os.environ``.
    environ: Mapping[str, str] | None = attrs.field(default=None, repr=False, eq=False)

    def env(self, name: str) -> str | None:
        environ = os.environ if self.environ is None else self.environ
        value = environ.get(name)
        return value or None


def settings_from_request(req: RunRequest, *, for_agent_provider: bool = True, role: str | None = None
                          ) -> ProviderSettings:
    """The settings of one role's client.

    A role's own settings (``req.models.role_settings[role]``, ``[models.ROLE]`` in a run config file) win.
    A role that sets neither a base URL nor a key variable of its own gets ``--model-base-url`` and
    ``--model-api-key-env`` when it uses the agent's provider (never when it names its own server: the agent's
    key is not sent there).
    ``--max-connections`` applies to every role without its own; the other reliability knobs to every provider.
    The request is taken as checked (:func:`agentcompass.request_checks.check_request`)."""
    own = req.models.role_settings.get(role) if role else None
    inherit = for_agent_provider and not (own is not None and (own.base_url or own.api_key_env))
    return ProviderSettings(
        base_url=(own.base_url if own is not None and own.base_url else None)
        or (req.models.base_url if inherit else None),
        api_key_env=(own.api_key_env if own is not None and own.api_key_env else None)
        or (req.models.api_key_env if inherit else None),
        max_retries=req.models.max_retries,
        max_connections=(own.max_connections if own is not None and own.max_connections
                         else req.models.max_connections),
        request_timeout=req.models.request_timeout,
    )


def load_credentials(environ: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The credentials file as ``{provider: {key: value}}``; ``{}`` when there is none."""
    environ = os.environ if environ is None else environ
    explicit = environ.get(CREDENTIALS_ENV)
    path = Path(explicit).expanduser() if explicit else DEFAULT_CREDENTIALS.expanduser()
    if not path.is_file():
        if explicit:
            raise UsageError(f"{CREDENTIALS_ENV} names {path}, which is not a file")
        return {}
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except OSError as exc:
        raise UsageError(f"cannot read the credentials file {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        # The parser's message may quote the file's text; name only the position.
        where = f"line {getattr(exc, 'lineno', '?')}"
        raise UsageError(f"the credentials file {path} is not valid ({where}); no value is shown") from None
    if not isinstance(data, dict):
        raise UsageError(f"the credentials file {path} must hold one table per provider")
    return {str(k): dict(v) for k, v in data.items() if isinstance(v, dict)}


def parse_value(text: Any) -> Any:
    """A ``--model-arg`` value: JSON when it parses (``0.2``, ``true``, ``["a"]``), else the string."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
