"""OpenAI chat completions on the standard library alone, for code that runs inside a task's environment.

An upstream runner that a benchmark copies into its environment reaches the run's model gateway (or any
OpenAI-compatible endpoint) with this module. It imports nothing but the standard library (``urllib`` only when
a call is made) and nothing by its own name, so it works under any name in any image with a ``python3``: put it
in the runner's package and copy it with the runner. The bundled runners link it into their packages
(``example_interactive/chat_client.py``, ``taubench_runner/chat_client.py`` are symbolic links to this file);
a benchmark may also write :func:`source` into the environment itself::

    from agentcompass.runtime import chat_client
    await env.write_text("my_runner/chat_client.py", chat_client.source())

The gateway already retries the provider (429, 5xx, timeouts); here a request is tried once more only when the
endpoint could not be reached, or answered 5xx without ``x-should-retry: false``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Seconds before the one retry.
RETRY_DELAY_SECONDS = 1.0


class ModelCallError(Exception):
    """A model call failed for good: the endpoint refused it, or could not be reached twice."""


class _Retryable(Exception):
    pass


class ChatClient:
    """One endpoint. :meth:`complete` posts a chat-completion request body and returns the answer's JSON object."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 600.0,
                 retry_delay: float = RETRY_DELAY_SECONDS) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.timeout = timeout
        self.retry_delay = retry_delay
        #: Calls made, per model.
        self.calls: dict[str, int] = {}

    def complete(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` (``model``, ``messages``, ...); the answer, or :class:`ModelCallError` naming why not."""
        model = str(body.get("model", ""))
        self.calls[model] = self.calls.get(model, 0) + 1
        data = json.dumps(body).encode("utf-8")
        attempts = 2
        for attempt in range(1, attempts + 1):
            try:
                return self._post(data)
            except _Retryable as exc:
                if attempt == attempts:
                    raise ModelCallError(f"{exc} (after {attempts} attempts)") from None
                time.sleep(self.retry_delay)
        raise AssertionError("unreachable")

    def _post(self, data: bytes) -> dict[str, Any]:
        import urllib.error  # here, so that code that never calls a model never loads http and ssl
        import urllib.request

        request = urllib.request.Request(
            self.url, data=data, method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json",
                     "Authorization": f"Bearer {self.api_key}"},
        )
        where = f"POST {self.url}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = error_detail(exc)
            message = f"model endpoint answered HTTP {exc.code} {exc.reason} to {where}" + (
                f": {detail}" if detail else "")
            if exc.code >= 500 and (exc.headers.get("x-should-retry") or "").lower() != "false":
                raise _Retryable(message) from None
            raise ModelCallError(message) from None
        except (urllib.error.URLError, OSError) as exc:
            raise _Retryable(f"cannot reach the model endpoint ({where}): {getattr(exc, 'reason', exc)}") from None
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise ModelCallError(f"model endpoint sent an invalid chat completion to {where}: "
                                 f"{raw[:300].decode('utf-8', 'replace')!r}")
        return payload


def first_message(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The assistant message of a chat completion (``choices[0].message``), or ``None`` when it has none."""
    try:
        message = payload["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return None
    return message if isinstance(message, dict) else None


def error_detail(exc: Any) -> str:
    """The message of an HTTP error's body (OpenAI's ``{"error": {"message"}}``, or its text), cut short."""
    try:
        raw = exc.read()[:500].decode("utf-8", "replace")
    except Exception:
        return ""
    try:
        err = json.loads(raw).get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    except (ValueError, AttributeError):
        pass
    return raw.strip()


def source() -> str:
    """This module's text, to copy into an environment beside a runner that imports it."""
    return Path(__file__).read_text(encoding="utf-8")
