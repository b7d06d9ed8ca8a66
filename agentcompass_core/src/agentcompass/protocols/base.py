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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentcompass.runtime.model_stream import StreamAssembler, StreamEnd, StreamEvent
from agentcompass.runtime.models import ChatResponse, ModelError, Usage


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


class Encoder(abc.ABC):
    """Writes a streamed answer in a protocol: ``start()``, ``event()`` per piece, or ``error()``."""

    def start(self) -> bytes:
        return b""

    @abc.abstractmethod
    def event(self, event: StreamEvent) -> bytes: ...

    @abc.abstractmethod
    def error(self, message: str, kind: str = "api_error") -> bytes: ...


#: Reads one JSON value at an offset of a text, as ``json.loads`` reads a whole text (no whitespace around it).
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


class Decoder(abc.ABC):
    """Reads a protocol's streamed answer: ``feed()`` each server-sent event, then ``end()``."""

    def __init__(self, model: str) -> None:
        self.model = model
        #: The pieces read so far (``kept`` adds them).
        self.assembler = StreamAssembler()
        self.usage = Usage()

    @staticmethod
    def payload(data: str) -> Mapping[str, Any] | None:
        """An event's JSON object (None for an empty event, ``[DONE]`` or anything but an object)."""
        if not data:
            return None
        if data[0] == "{" and data[-1] == "}":  # the usual event: one scan, without json.loads' checks around it
            try:
                value, end = _scan(data, 0)
            except StopIteration:
                end = -1
            if end == len(data):
                return value
        elif data.strip() == "[DONE]":
            return None
        value = json.loads(data)  # what the scan could not read: json.loads' reading (or error) of it
        return value if isinstance(value, Mapping) else None

    def kept(self, pieces: list[StreamEvent]) -> list[StreamEvent]:
        """``pieces``, added to :attr:`assembler` first."""
        for piece in pieces:
            self.assembler.add(piece)
        return pieces

    @abc.abstractmethod
    def feed(self, event: str, data: str) -> list[StreamEvent]:
        """The canonical pieces in one event. :raises UpstreamStreamError: the event is an error."""

    @abc.abstractmethod
    def end(self) -> StreamEnd: ...


class Codec(abc.ABC):
    """One vendor protocol: requests and answers to and from the canonical form, whole and streamed."""

    name: str = ""
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
