"""The secrets the page masks, gathered the way the run found them.

A run directory is already masked when written: the runner registers every model client's ``secrets`` (the
provider's API key, from its environment variable or the credentials file, and credentials in a base URL) with
its :class:`~agentcompass.runtime.model_providers.Redactor`. The page masks once more, with the secrets *this* machine
knows, so a run written elsewhere (or before a key was known) does not show one:

* the value of every environment variable whose name marks a credential (``*_API_KEY``, ``*_TOKEN``,
  ``*_SECRET``, ``*_PASSWORD``, ``*_ACCESS_KEY``), the variable the run's ``--model-api-key-env`` named among them;
* every string value of the credentials file (``$AGENTCOMPASS_CREDENTIALS`` or
  ``~/.config/agentcompass/credentials.toml``), read with the core's public ``load_credentials``;
* credentials inside the run's ``--model-base-url`` (``https://user:pass@host``);
* values given with ``--secret``.

What is guaranteed: no value of those (at least :data:`~agentcompass.runtime.model_providers.MIN_SECRET_LENGTH`
characters long), nor its JSON, URL or base64 encodings, appears in the page or in what ``view`` serves.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from agentcompass.errors import UsageError
from agentcompass.runtime.model_providers import Redactor, load_credentials

_CREDENTIAL_NAME = re.compile(r"(^|_)(API_?KEY|TOKEN|SECRET|PASSWORD|ACCESS_KEY)$", re.IGNORECASE)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def known_secrets(requests: Iterable[Mapping[str, Any]], environ: Mapping[str, str] | None = None,
                  extra: Iterable[str] = ()) -> list[str]:
    """The secret values to mask for runs made with ``requests`` (their ``run.json`` requests)."""
    environ = os.environ if environ is None else environ
    found: list[str] = [v for k, v in environ.items() if _CREDENTIAL_NAME.search(k) and v]
    for req in requests:
        name = req.get("model_api_key_env")
        if isinstance(name, str) and environ.get(name):
            found.append(environ[name])
        base_url = req.get("model_base_url")
        if isinstance(base_url, str):
            parts = urlsplit(base_url)
            found += [s for s in (parts.password, parts.username) if s]
    try:
        found += list(_strings(load_credentials(environ)))
    except UsageError:
        pass  # an unreadable credentials file holds nothing the run could have used either
    found += [s for s in extra if s]
    return found


def make_redactor(requests: Iterable[Mapping[str, Any]], environ: Mapping[str, str] | None = None,
                  extra: Iterable[str] = ()) -> Redactor:
    redactor = Redactor()
    redactor.add(*known_secrets(requests, environ, extra))
    return redactor
