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
        buffer = self._buffer + chunk
        end = buffer.rfind(b"\n") + 1
        self._buffer = buffer[end:]  # an unfinished line waits for the next chunk
        if not end:
            return []
        # The complete lines decoded at once (a line break never falls inside a UTF-8 sequence, so this reads
        # what decoding line by line would).
        text = buffer[:end].decode("utf-8", errors="replace")
        lines = text.split("\n")
        lines.pop()  # what follows the last line break: nothing
        carriage = "\r" in text
        out: list[tuple[str, str]] = []
        event, data = self._event, self._data
        for line in lines:
            if carriage:
                line = line.rstrip("\r")
            if not line:
                if data or event:
                    out.append((event, "\n".join(data)))
                event, data = "", []
            elif line[0] == ":":
                continue
            else:
                name, _, value = line.partition(":")
                if value[:1] == " ":
                    value = value[1:]
                if name == "data":
                    data.append(value)
                elif name == "event":
                    event = value
        self._event, self._data = event, data
        return out

    def close(self) -> list[tuple[str, str]]:
        """What a stream ending without a blank line left."""
        out = self.feed(b"\n\n") if self._buffer else []
        if self._data:
            out.append((self._event, "\n".join(self._data)))
            self._event, self._data = "", []
        return out
