"""Answers kept on disk (a trajectory's call record, a cache entry) turned back into live ones: a
:class:`~agentcompass.runtime.models.ChatResponse`, its stream, or a vendor protocol's reply to a passthrough
request (:class:`~agentcompass.runtime.model_stream.NativeReply`, streamed when the request asked so). Shared by
:mod:`agentcompass.models.replay` and :mod:`agentcompass.models.call_cache`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from typing import Any

from agentcompass.protocols import CODECS, CanonicalRequest, ProtocolError
from agentcompass.protocols.sse import SSEParser
from agentcompass.runtime.model_stream import NativeReply, NativeRequest, StreamEnd, events_of
from agentcompass.runtime.models import ChatResponse, Usage

#: The note :func:`~agentcompass.models.metering.bound_call` leaves in a string it cut.
CUT_NOTE = "more bytes not recorded]"


def response_json(response: ChatResponse) -> dict[str, Any]:
    """What a cache entry keeps of an answer."""
    u = response.usage
    return {"message": dict(response.message), "model": response.model, "finish_reason": response.finish_reason,
            "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                      "cached_tokens": u.cached_tokens, "reasoning_tokens": u.reasoning_tokens}}


def response_from(data: Mapping[str, Any], source: str) -> ChatResponse:
    """An answer from :func:`response_json`'s shape or a trajectory's call record, marked with its ``source``."""
    recorded = data.get("usage")
    usage: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else data
    return ChatResponse(
        message=dict(data.get("message") or data.get("response") or {"role": "assistant", "content": ""}),
        model=str(data.get("model") or ""),
        usage=Usage(prompt_tokens=int(usage.get("prompt_tokens") or 0),
                    completion_tokens=int(usage.get("completion_tokens") or 0),
                    cached_tokens=int(usage.get("cached_tokens") or 0),
                    reasoning_tokens=int(usage.get("reasoning_tokens") or 0)),
        finish_reason=str(data.get("finish_reason") or "stop"),
        metadata={"source": source},
    )


def marked(response: ChatResponse, source: str) -> ChatResponse:
    return replace(response, metadata={**response.metadata, "source": source})


def is_count(request: NativeRequest) -> bool:
    """``request`` counts tokens (Anthropic's ``messages/count_tokens``, Gemini's ``:countTokens``)."""
    return request.path.endswith(("count_tokens", ":countTokens"))


def parse_native(request: NativeRequest) -> CanonicalRequest:
    """The canonical form of a passthrough request (Gemini's model and streaming are in its URL, not its body).

    :raises ProtocolError: the body is not a request of its protocol.
    """
    body = request.body
    if request.protocol == "gemini" and isinstance(body, Mapping):
        body = {**body, "model": "", "stream": request.stream}
    return CODECS[request.protocol].parse_request(body)


def count_tokens_reply(request: NativeRequest) -> NativeReply:
    """A token count answered here (about four characters a token), in the request's protocol: no provider
    needed."""
    body = dict(request.body) if isinstance(request.body, Mapping) else {}
    try:
        if request.protocol == "gemini":
            inner = body.get("generateContentRequest") or {"contents": body.get("contents") or []}
            canonical = CODECS["gemini"].parse_request({**inner, "model": ""})
        else:
            canonical = CODECS["anthropic"].parse_request({**body, "max_tokens": 1})
        size = len(json.dumps(canonical.messages, ensure_ascii=False)) + len(json.dumps(canonical.tools))
    except ProtocolError:
        size = len(json.dumps(body, default=str))
    count = max(1, size // 4)
    answer = {"totalTokens": count} if request.protocol == "gemini" else {"input_tokens": count}
    return NativeReply(200, {"content-type": "application/json"}, json.dumps(answer).encode())


def native_reply(response: ChatResponse, request: NativeRequest, model: str, source: str) -> NativeReply:
    """``response`` as the reply of ``request``'s protocol: a whole JSON body, or its event stream."""
    codec = CODECS[request.protocol]
    if not request.stream:
        body = json.dumps(codec.render_response(response, model)).encode()
        return NativeReply(200, {"content-type": "application/json"}, body, metadata={"source": source})
    encoder = codec.encoder(model, parse_native(request))

    async def chunks() -> AsyncIterator[bytes]:
        yield encoder.start()
        for event in events_of(response):
            yield encoder.event(event)

    return NativeReply(200, {"content-type": "text/event-stream"}, chunks=chunks(), metadata={"source": source})


def watch_reply(reply: NativeReply, request: NativeRequest, model: str,
                keep: Callable[[ChatResponse], None]) -> NativeReply:
    """``reply`` unchanged for its reader, with ``keep`` told of the whole answer once it is read (a
    successful reply only; a stream is decoded as it passes)."""
    codec = CODECS[request.protocol]
    if reply.status != 200:
        return reply
    if reply.chunks is None:
        try:
            keep(codec.parse_response(json.loads(reply.body)))
        except (ProtocolError, ValueError):
            pass
        return reply
    inner = reply.chunks
    decoder, parser = codec.decoder(model), SSEParser()

    async def chunks() -> AsyncIterator[bytes]:
        readable = True
        try:
            async for chunk in inner:
                if readable:
                    try:
                        for name, data in parser.feed(chunk):
                            decoder.feed(name, data)
                    except Exception:  # an error event or a shape we cannot read: relay it, keep nothing
                        readable = False
                yield chunk
        finally:
            await inner.aclose()  # type: ignore[attr-defined]
        if readable:
            ended: StreamEnd = decoder.end()
            keep(ended.response)

    return replace(reply, chunks=chunks())
