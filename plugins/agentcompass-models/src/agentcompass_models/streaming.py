"""Streamed answers from a provider (``ModelClient.stream``), read with the core's codec of its protocol.

The request goes out as for :mod:`agentcompass_models.native` (retried before any byte arrives); the answer's
server-sent events are decoded piece by piece as they come (text, reasoning, tool-call pieces), then one
``StreamEnd`` with the whole answer. A provider that answers a streamed request whole (JSON) is cut into
pieces. Closing the generator (the agent went away) closes the provider's connection.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

from agentcompass.runtime.codecs import CODECS, ProtocolError, SSEParser
from agentcompass.runtime.model_stream import NativeRequest, StreamEnd, StreamEvent, events_of

from agentcompass_models.native import send_native

if TYPE_CHECKING:
    from agentcompass_models.http import HTTPModelClient


async def stream_answer(client: HTTPModelClient, protocol: str, url: str, headers: dict[str, str],
                        body: Mapping[str, Any]) -> AsyncGenerator[StreamEvent, None]:
    """POST ``body`` (already the provider's request, asking for a stream) and yield the answer's pieces."""
    codec = CODECS[protocol]
    headers = {**headers, "Accept": "text/event-stream"}
    reply = await send_native(client, NativeRequest(protocol, "", dict(body), stream=True), url, headers,
                              model_in_body=False, params={})
    if reply.status >= 400 or reply.error is not None:
        if reply.chunks is not None:
            await reply.chunks.aclose()  # type: ignore[attr-defined]
        raise reply.error or client._http_error(reply.status, reply.body)
    if reply.chunks is None:  # answered whole
        try:
            response = codec.parse_response(json.loads(reply.body))
        except (ProtocolError, ValueError) as exc:
            raise client._error(f"malformed response: {exc}", retryable=False) from None
        for event in events_of(dataclasses.replace(response, model=response.model or client.model)):
            yield event
        return
    decoder = codec.decoder(client.model)
    parser = SSEParser()
    async with contextlib.aclosing(reply.chunks):  # type: ignore[type-var]
        async for chunk in reply.chunks:
            for name, data in parser.feed(chunk):
                for piece in _decoded(client, decoder, name, data):
                    yield piece
    for name, data in parser.close():
        for piece in _decoded(client, decoder, name, data):
            yield piece
    yield StreamEnd(decoder.end().response)


def _decoded(client: HTTPModelClient, decoder: Any, name: str, data: str) -> list[StreamEvent]:
    try:
        return decoder.feed(name, data)
    except json.JSONDecodeError:
        raise client._error("malformed stream: an event is not JSON", retryable=False) from None
