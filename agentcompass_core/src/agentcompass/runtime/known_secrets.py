"""The secret values a run masks in everything it writes, gathered from where this machine keeps them.

The run (when it writes ``results.jsonl``, ``trajectories.jsonl``, ``logs.jsonl``, ``summary.json``) and the
report (when it shows a run) mask the same set, so the files themselves are clean — the report masking again
is a safety net for runs written elsewhere:

* the value of every environment variable whose name marks a credential (``*_API_KEY``, ``*_TOKEN``,
  ``*_SECRET``, ``*_PASSWORD``, ``*_ACCESS_KEY``), and of the variables ``--model-api-key-env`` and
  ``[models.ROLE] api_key_env`` name;
* every string value of the credentials file (``$AGENTCOMPASS_CREDENTIALS`` or
  ``~/.config/agentcompass/credentials.toml``);
* credentials inside ``--model-base-url`` and the roles' ``base_url`` (``https://user:pass@host``);
* the values of the variables named with ``--secret-env`` (and, for the report, values given with
  ``--secret``).

Values shorter than :data:`~agentcompass.redaction.MIN_SECRET_LENGTH` are ignored by the redactor.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from agentcompass.errors import UsageError
from agentcompass.runtime.model_providers import load_credentials

#: Environment variable names that mark a credential.
CREDENTIAL_NAME = re.compile(r"(^|_)(API_?KEY|TOKEN|SECRET|PASSWORD|ACCESS_KEY)$", re.IGNORECASE)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def missing_secret_env(names: Iterable[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``--secret-env`` names that are not set (an error to report: masking nothing would be silent)."""
    environ = os.environ if environ is None else environ
    return [n for n in names if not environ.get(n)]


def known_secrets(requests: Iterable[Mapping[str, Any]], environ: Mapping[str, str] | None = None,
                  extra: Iterable[str] = ()) -> list[str]:
    """The secret values to mask for runs made with ``requests`` (``run.json`` requests, as JSON data)."""
    environ = os.environ if environ is None else environ
    found: list[str] = [v for k, v in environ.items() if CREDENTIAL_NAME.search(k) and v]
    for req in requests:
        roles = [r for r in (req.get("role_settings") or {}).values() if isinstance(r, Mapping)]
        names = [req.get("model_api_key_env"), *(req.get("secret_env") or ()), *(r.get("api_key_env") for r in roles)]
        found += [environ[n] for n in names if isinstance(n, str) and environ.get(n)]
        for base_url in (req.get("model_base_url"), *(r.get("base_url") for r in roles)):
            if isinstance(base_url, str):
                parts = urlsplit(base_url)
                found += [s for s in (parts.password, parts.username) if s]
    try:
        found += list(_strings(load_credentials(environ)))
    except UsageError:
        pass  # an unreadable credentials file holds nothing the run could have used either
    found += [s for s in extra if s]
    return found
