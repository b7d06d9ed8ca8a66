"""Server-sent events: writing frames and reading them back incrementally."""

from __future__ import annotations

import json
from typing import Any


def frame(data: Any, event: str | None = None) -> bytes:
    """One event: ``event: NAME`` (when given) and ``data: JSON`` (``data`` as is when it is a string)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def last_boundary(buffer: bytes) -> int:
    """Where the last complete event of ``buffer`` ends (after its blank line), or -1: what may be relayed
    whole, leaving an unfinished event for the next read."""
    end = max(buffer.rfind(b"\n\n"), buffer.rfind(b"\r\r"))
    crlf = buffer.rfind(b"\r\n\r\n")
    if crlf >= 0 and crlf + 4 > end + 2:
        return crlf + 4
    return end + 2 if end >= 0 else -1


class SSEParser:
    """Feed bytes as they arrive; get complete ``(event name, data text)`` pairs back."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        lines = (self._buffer + chunk).split(b"\n")
        self._buffer = lines.pop()  # an unfinished line waits for the next chunk
        out: list[tuple[str, str]] = []
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if not line:
                if self._data or self._event:
                    out.append((self._event, "\n".join(self._data)))
                self._event, self._data = "", []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    self._event = value
                elif name == "data":
                    self._data.append(value)
        return out

    def close(self) -> list[tuple[str, str]]:
        """What a stream ending without a blank line left."""
        out = self.feed(b"\n\n") if self._buffer else []
        if self._data:
            out.append((self._event, "\n".join(self._data)))
            self._event, self._data = "", []
        return out
