"""The secrets the page masks: the same set the run masks when it writes (:mod:`agentcompass.runtime.known_secrets`).

A run directory is already masked when written. The page masks once more, with the secrets *this* machine
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

from collections.abc import Iterable, Mapping
from typing import Any

from agentcompass.runtime.known_secrets import known_secrets
from agentcompass.runtime.model_providers import Redactor

__all__ = ["known_secrets", "make_redactor"]


def make_redactor(requests: Iterable[Mapping[str, Any]], environ: Mapping[str, str] | None = None,
                  extra: Iterable[str] = ()) -> Redactor:
    redactor = Redactor()
    redactor.add(*known_secrets(requests, environ, extra))
    return redactor
