"""What every protocol codec provides, and the canonical request they all translate through.

The canonical conversation is OpenAI's chat-completions message list (what ``ModelClient.chat`` takes and
what trajectories hold), with a few keys for what that format has no place for:

* an assistant message's ``reasoning_content`` (its reasoning text) and ``reasoning_blocks`` (the vendor's own
  reasoning blocks — Anthropic ``thinking`` / ``redacted_thinking`` with their signatures, Responses
  ``reasoning`` items with their encrypted content — each rendered back only into its own protocol);
* a tool call of ``"type": "custom"`` (``{"custom": {"name", "input"}}``): a free-form tool such as Codex's
  ``apply_patch``;
* ``cache_control`` on a content part, tool call, tool message or tool (Anthropic prompt caching) and
  ``is_error`` on a tool message (Anthropic's failed tool result).

Generation settings use chat-completions names: ``max_tokens``, ``temperature``, ``top_p``, ``stop`` (a
list), ``tool_choice`` (``"auto"``, ``"none"``, ``"required"`` or ``{"type": "function", "function":
{"name"}}``), ``parallel_tool_calls``; and ``top_k``, ``thinking``, ``metadata``, ``reasoning_effort`` where a
protocol has them.
"""

from __future__ import annotations

import abc
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentcompass.runtime.model_stream import StreamEnd, StreamEvent
from agentcompass.runtime.models import ChatResponse, ModelError


class ProtocolError(Exception):
    """A request the protocol (or this gateway) cannot take: answered with ``status`` in the protocol's shape."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class UpstreamStreamError(ModelError):
    """A provider's stream carried an error event."""


@dataclass(frozen=True)
class CanonicalRequest:
    """One model call in the canonical form."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    stream: bool = False
    #: Chat completions' ``stream_options.include_usage``: a last chunk with the usage.
    include_usage: bool = False
    #: What the request held that the canonical form leaves out (for the log), e.g. ``"tool web_search"``.
    dropped: tuple[str, ...] = ()


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


def text_of(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a list joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and "text" in p)
    return str(content)


def arguments_object(raw: Any) -> dict[str, Any]:
    """A tool call's JSON arguments as an object (``{}`` when empty; non-objects wrapped, never lost)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        value = json.loads(raw or "{}")
    except (TypeError, json.JSONDecodeError):
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ProtocolError(message)


class Encoder(abc.ABC):
    """Writes a streamed answer in a protocol: ``start()``, ``event()`` per piece, or ``error()``."""

    def start(self) -> bytes:
        return b""

    @abc.abstractmethod
    def event(self, event: StreamEvent) -> bytes: ...

    @abc.abstractmethod
    def error(self, message: str, kind: str = "api_error") -> bytes: ...


class Decoder(abc.ABC):
    """Reads a protocol's streamed answer: ``feed()`` each server-sent event, then ``end()``."""

    @abc.abstractmethod
    def feed(self, event: str, data: str) -> list[StreamEvent]:
        """The canonical pieces in one event. :raises UpstreamStreamError: the event is an error."""

    @abc.abstractmethod
    def end(self) -> StreamEnd: ...


class Codec(abc.ABC):
    """One vendor protocol: requests and answers to and from the canonical form, whole and streamed."""

    name: str = ""
    #: Error ``type`` names the protocol uses for (400, 401, 404, 429, 5xx).
    content_type_stream = "text/event-stream"

    @abc.abstractmethod
    def parse_request(self, body: Any) -> CanonicalRequest: ...

    @abc.abstractmethod
    def render_request(self, request: CanonicalRequest, model: str) -> dict[str, Any]: ...

    @abc.abstractmethod
    def parse_response(self, data: Any) -> ChatResponse: ...

    @abc.abstractmethod
    def render_response(self, response: ChatResponse, model: str) -> dict[str, Any]: ...

    @abc.abstractmethod
    def encoder(self, model: str, request: CanonicalRequest) -> Encoder: ...

    @abc.abstractmethod
    def decoder(self, model: str) -> Decoder: ...

    @abc.abstractmethod
    def error_body(self, status: int, message: str, kind: str | None = None) -> dict[str, Any]: ...


def error_kind(status: int) -> str:
    """The conventional error type for an HTTP status (shared by the OpenAI and Anthropic shapes)."""
    return {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
            529: "overloaded_error"}.get(status, "api_error")
