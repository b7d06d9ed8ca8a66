"""The model client interface: one async chat call in OpenAI's message format.

Providers (registered with ``register_models``) return a :class:`ModelClient`; the runtime wraps it to meter
every call into the task's trajectory and serves it to environments through the model gateway.

Beyond ``chat`` a client may stream (``stream``, by default the whole answer of ``chat`` in pieces) and take
requests in its provider's own protocol (``native_protocols`` / ``native``): the gateway then passes an agent's
request of that protocol through unchanged. See :mod:`agentcompass.runtime.model_stream`.
"""

from __future__ import annotations

import abc
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Token counts of one call. ``prompt_tokens`` include ``cached_tokens`` (prompt tokens read from the
    provider's cache); ``completion_tokens`` include ``reasoning_tokens``."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ChatResponse:
    """One chat completion.

    :param message: the assistant message, OpenAI-style: ``{"role": "assistant", "content": ...,
        "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]}``.
    """

    message: Mapping[str, Any]
    model: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    #: Provider facts about the call for the trajectory (e.g. ``{"attempts": 2}``); never a secret.
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def content(self) -> str:
        return str(self.message.get("content") or "")

    @property
    def tool_calls(self) -> list[Mapping[str, Any]]:
        return list(self.message.get("tool_calls") or [])


# -- streamed answers and native requests (see :mod:`agentcompass.runtime.model_stream`) -------------------------


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer's text."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's reasoning (thinking) text; ``signature`` closes a signed block (Anthropic)."""

    text: str = ""
    signature: str = ""


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of the ``index``-th tool call: its first piece carries ``id`` and ``name``; every piece may
    carry a piece of ``arguments`` (JSON text for a function, free text for a ``custom`` tool)."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""
    kind: str = "function"


@dataclass(frozen=True)
class StreamEnd:
    """The last event: the whole answer."""

    response: ChatResponse


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | StreamEnd


def events_of(response: ChatResponse) -> list[StreamEvent]:
    """A whole answer as stream events (reasoning, text, each tool call, the end)."""
    message = response.message
    out: list[StreamEvent] = []
    if message.get("reasoning_content"):
        out.append(ReasoningDelta(str(message["reasoning_content"])))
    if message.get("content"):
        content = message["content"]
        if not isinstance(content, str):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        out.append(TextDelta(content))
    for i, call in enumerate(message.get("tool_calls") or ()):
        kind = str(call.get("type") or "function")
        body = call.get(kind) or call.get("function") or {}
        arguments = body.get("input") if kind == "custom" else body.get("arguments")
        out.append(ToolCallDelta(i, id=str(call.get("id") or ""), name=str(body.get("name") or ""),
                                 arguments=str(arguments or ""), kind=kind))
    out.append(StreamEnd(response))
    return out


@dataclass
class StreamAssembler:
    """Collects stream pieces into a whole answer (``finish``)."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    signature: str = ""
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: Characters received so far (text, reasoning and arguments): a running measure of the output.
    chars: int = 0

    def add(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.text.append(event.text)
            self.chars += len(event.text)
        elif isinstance(event, ReasoningDelta):
            self.reasoning.append(event.text)
            self.signature = event.signature or self.signature
            self.chars += len(event.text)
        elif isinstance(event, ToolCallDelta):
            call = self.calls.setdefault(event.index, {"id": "", "name": "", "arguments": [], "kind": event.kind})
            call["id"] = event.id or call["id"]
            call["name"] = event.name or call["name"]
            call["arguments"].append(event.arguments)
            self.chars += len(event.arguments)

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        calls = []
        for _, call in sorted(self.calls.items()):
            arguments = "".join(call["arguments"])
            if call["kind"] == "custom":
                calls.append({"id": call["id"], "type": "custom", "custom": {"name": call["name"], "input": arguments}})
            else:
                calls.append({"id": call["id"], "type": "function",
                              "function": {"name": call["name"], "arguments": arguments or "{}"}})
        if calls:
            message["tool_calls"] = calls
        return message

    def finish(self, model: str, usage: Usage | None = None, finish_reason: str | None = None,
               metadata: Mapping[str, Any] | None = None) -> ChatResponse:
        message = self.message()
        reason = finish_reason or ("tool_calls" if message.get("tool_calls") else "stop")
        return ChatResponse(message=message, model=model, usage=usage or Usage(), finish_reason=reason,
                            metadata=dict(metadata or {}))


@dataclass(frozen=True)
class NativeRequest:
    """A request in a vendor protocol, for a client that speaks it (``ModelClient.native_protocols``).

    :param protocol: ``"anthropic"``, ``"responses"``, ``"chat"`` or ``"gemini"``.
    :param path: the endpoint below the API root (``"messages"``, ``"messages/count_tokens"``,
        ``"responses"``, ``"chat/completions"``, ``"v1beta/models/NAME:streamGenerateContent"`` — Gemini's
        paths start with their API version).
    :param body: the request body as the agent sent it; the client puts its own model name in.
    :param headers: protocol headers worth forwarding (``anthropic-version``, ``anthropic-beta``, ...);
        never credentials.
    :param stream: the agent asked for a streamed answer.
    """

    protocol: str
    path: str
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    stream: bool = False
    query: Mapping[str, str] = field(default_factory=dict)


@dataclass
class NativeReply:
    """The provider's answer to a :class:`NativeRequest`: its status, headers worth returning, and either the
    whole body or its chunks as they arrive (``chunks``; whoever reads it closes it with ``aclose``)."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    chunks: AsyncIterator[bytes] | None = None
    #: For an error answer, the provider's reading of it (masked, ``fatal`` when every call will fail so): what
    #: the trajectory records and what stops the run.
    error: Exception | None = None
    #: Facts about the answer for the trajectory, as ``ChatResponse.metadata`` (``{"source": "replay"}``).
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: Who answered, as an error message names it (``"openai-compatible model 'm' at http://host/v1"``,
    #: credentials masked): what the gateway says when it cannot read the answer. Empty when not known.
    origin: str = ""

    def json(self) -> Any:
        return json.loads(self.body or b"null")


class ModelError(Exception):
    """A model call failed.

    :param retryable: a later identical call may succeed (rate limit, server error, timeout).
    :param status: the HTTP status of the provider's answer, when there was one.
    :param fatal: every later call will fail the same way (bad credentials, unknown model), so the run
        stops scheduling tasks instead of failing them one by one.
    """

    def __init__(
        self, message: str, *, retryable: bool = False, status: int | None = None, fatal: bool = False
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.fatal = fatal


class ModelClient(abc.ABC):
    """An async chat client for one model.

    Providers register a factory with ``register_models``; for ``MODEL`` = ``provider/name`` the runtime calls
    ``factory(name, settings=settings, **options)``: ``settings`` is the run's
    :class:`~agentcompass.runtime.model_providers.ProviderSettings` (base URL, the *name* of the key's variable,
    retries, connections, timeout), ``options`` the ``--model-arg`` values as strings (the agent role only).
    Reject an option you do not know with :class:`~agentcompass.errors.UsageError`.
    """

    #: The model's name as the provider knows it.
    model: str = ""
    #: Values to mask in everything the run writes and prints (the provider's API key, ...). The runtime reads
    #: it once, when the client is built.
    secrets: tuple[str, ...] = ()
    #: The model takes a ``seed`` generation setting: the runtime passes each (task, trial)'s seed unless the
    #: caller gives one.
    accepts_seed: bool = False

    @abc.abstractmethod
    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        """Send a conversation and return the assistant's next message.

        :param messages: OpenAI-style messages (system, user, assistant, tool).
        :param tools: OpenAI-style function tool schemas the model may call.
        :param params: generation settings (temperature, max_tokens, seed, ...).
        :raises ModelError: the call failed.
        """

    #: Protocols this client takes requests in as they are (``"anthropic"``, ``"responses"``, ``"chat"``,
    #: ``"gemini"``): an agent speaking one of them is passed through to :meth:`native`.
    native_protocols: frozenset[str] = frozenset()

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """The answer as it is produced: pieces, then one ``StreamEnd`` with the whole answer.

        The default streams the whole answer of :meth:`chat` at once; a provider that streams overrides it.
        """
        response = await self.chat(messages, tools=tools, **params)
        for event in events_of(response):
            yield event

    async def native(self, request: NativeRequest) -> NativeReply:
        """Send a request of one of :attr:`native_protocols` as is (the model name and credentials replaced).

        :raises ModelError: the call failed before the provider answered.
        """
        raise ModelError(f"{type(self).__name__} takes no {request.protocol!r} requests as they are")

    async def aclose(self) -> None:  # noqa: B027
        """Release connections."""
