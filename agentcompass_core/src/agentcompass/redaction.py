"""Redaction of known secret values from anything agentcompass writes (results, logs, trajectories)."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import attrs

MASK = "***"
#: Values shorter than this are not treated as secrets (masking "a" everywhere would destroy output).
MIN_SECRET_LENGTH = 6


@attrs.define
class Redactor:
    """Replaces every registered secret value by ``***`` in strings and nested data."""

    _secrets: set[str] = attrs.field(factory=set)

    def add(self, *values: str | None) -> None:
        for value in values:
            if value and len(value) >= MIN_SECRET_LENGTH:
                self._secrets.add(value)
                # Its JSON-escaped form too: files hold JSON text, where a quote or backslash is escaped.
                escaped = json.dumps(value, ensure_ascii=False)[1:-1]
                if escaped != value:
                    self._secrets.add(escaped)

    @property
    def active(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        # Longest first, so a secret that contains another is masked whole.
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def data(self, value: Any) -> Any:
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.data(v) for v in value)
        return value

    def structlog_processor(
        self, _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        """A structlog processor masking secrets in every field of an event."""
        return self.data(event_dict) if self._secrets else event_dict
