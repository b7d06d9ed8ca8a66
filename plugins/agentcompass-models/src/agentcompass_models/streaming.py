"""Streamed answers from a provider (``ModelClient.stream``), read with the core's codec of its protocol.

The request goes out as for :mod:`agentcompass_models.native` (retried before any byte arrives); the answer's
server-sent events are decoded piece by piece as they come (text, reasoning, tool-call pieces), then one
``StreamEnd`` with the whole answer. A provider that answers a streamed request whole (JSON) is cut into
pieces. Closing the generator (the agent went away) closes the provider's connection. An answer that cannot be
read is asked for again while none of it has been yielded (see :func:`stream_answer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

from agentcompass.errors import describe
from agentcompass.runtime.codecs import CODECS, SSEParser
from agentcompass.runtime.model_stream import NativeRequest, StreamEnd, StreamEvent, events_of
from agentcompass.runtime.models import ModelError
from yarl import URL

from agentcompass_models.http import BACKOFF_BASE, BACKOFF_CAP, ProviderError, answer_problem, read_json
from agentcompass_models.native import send_native

if TYPE_CHECKING:
    from agentcompass_models.http import HTTPModelClient


async def stream_answer(client: HTTPModelClient, protocol: str, url: str | URL, headers: dict[str, str],
                        body: Mapping[str, Any]) -> AsyncGenerator[StreamEvent, None]:
    """POST ``body`` (already the provider's request, asking for a stream) and yield the answer's pieces.

    An answer that cannot be read (not JSON, the wrong shape, an event that is not JSON) is the provider's
    failure: asked again, under ``--max-retries``, while nothing of it has been yielded; retryable (an outage)
    when it is given up on."""
    attempt = 0
    while True:
        attempt += 1
        yielded = False
        try:
            async with contextlib.aclosing(_stream_once(client, protocol, url, headers, body)) as events:
                async for event in events:
                    yielded = True
                    yield event
            return
        except _Unreadable as exc:
            error = exc.error
            if yielded or attempt > client.settings.max_retries:
                error.attempts = attempt
                if attempt > 1:
                    error.args = (f"{error.args[0]} (after {attempt} attempts)",)
                raise error from None
        await asyncio.sleep(random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))))


class _Unreadable(Exception):
    """The provider's answer to one attempt could not be read (``error`` says how)."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error


async def _stream_once(client: HTTPModelClient, protocol: str, url: str | URL, headers: dict[str, str],
                       body: Mapping[str, Any]) -> AsyncGenerator[StreamEvent, None]:
    codec = CODECS[protocol]
    headers = {**headers, "Accept": "text/event-stream"}
    reply = await send_native(client, NativeRequest(protocol, "", dict(body), stream=True), url, headers,
                              model_in_body=False, params={})
    if reply.status >= 400 or reply.error is not None:
        if reply.chunks is not None:
            await reply.chunks.aclose()  # type: ignore[attr-defined]
        raise reply.error or client._http_error(reply.status, reply.body)
    if reply.chunks is None:  # answered whole
        data, problem = read_json(reply.body)
        if problem is None:
            problem = answer_problem(protocol, data)
        if problem is not None:
            raise _Unreadable(client.unreadable(reply.status, reply.body, problem))
        response = codec.parse_response(data)
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
    except ModelError:  # the provider's own error event: said by the provider, not unreadable
        raise
    except Exception as exc:
        why = "an event that is not JSON" if isinstance(exc, json.JSONDecodeError) else (
            f"an event that cannot be read ({describe(exc)})")
        raise _Unreadable(client.unreadable(200, data, f"an event stream holding {why}")) from None
