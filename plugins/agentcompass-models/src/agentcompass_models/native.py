"""Requests passed through in the provider's own protocol (``ModelClient.native``), streamed end to end.

The agent's body goes out as it came, with the provider's model name (and ``--model-arg`` settings) put in and
this client's credentials in the headers; protocol headers the gateway forwards (``anthropic-version``,
``anthropic-beta``) go along. Connection errors, 408/409/429 and 5xx answers are retried as for ``chat``
(before any byte reaches the agent), and so is a 200 answer that is not the protocol's answer (not JSON, JSON
of the wrong shape): past the retries it becomes a 502 whose error names the provider and what it answered. Any
other answer — an error too — goes back to the agent as the provider gave it. A streamed answer holds its
connection slot until the agent has read it or gone away: closing the chunk iterator (the gateway does when
the agent disconnects) closes the upstream connection. Its events are read by the gateway, which says so when
one cannot be read.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import aiohttp
from agentcompass.errors import describe
from agentcompass.runtime.model_stream import NativeReply, NativeRequest
from agentcompass.runtime.rate_limits import RATE_LIMITED
from yarl import URL

if TYPE_CHECKING:
    from agentcompass_models.http import HTTPModelClient, ProviderError, _Pool

#: Answers retried before anything is relayed.
RETRIED = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


async def _chunks(response: aiohttp.ClientResponse, pool: _Pool) -> AsyncIterator[bytes]:
    finished = False
    try:
        async for data in response.content.iter_any():
            yield data
        finished = True
    finally:
        if finished:
            response.release()  # read to the end: the connection goes back to the pool
        else:
            response.close()  # abandoned (the agent went away): the provider sees its client go
        pool.slots.release()


async def send_native(client: HTTPModelClient, request: NativeRequest, url: str | URL, headers: dict[str, str],
                      *, model_in_body: bool = True, params: dict[str, Any] | None = None) -> NativeReply:
    """Send ``request`` to ``url``, retried as :mod:`this module <agentcompass_models.native>` says.

    :param model_in_body: put the client's model into the body (not for Gemini, whose URL names it).
    :param params: what to merge into the body instead of the client's ``--model-arg`` settings.
    """
    from agentcompass_models.http import (
        BACKOFF_BASE,
        BACKOFF_CAP,
        RETRY_AFTER_CAP,
        EndpointUnreachable,
        _refused,
        _retry_after,
        rides_out,
    )

    counting = request.path.endswith(("count_tokens", "countTokens"))  # a count, not an answer to read

    pool = client._acquire_pool()
    body: dict[str, Any] = {**request.body, **({"model": client.model} if model_in_body else {}),
                            **(client.params if params is None else params)}
    if request.path.endswith("count_tokens"):
        body.pop("max_tokens", None)
    content = json.dumps(body, ensure_ascii=False).encode()
    attempt = 0
    deadline = time.monotonic() + client.settings.request_timeout
    while True:
        attempt += 1
        ticket = await pool.slots.acquire()
        released = False
        try:
            async with asyncio.timeout(client.settings.request_timeout):
                target, signed = await client.authorize(url, headers, content)
                response = await pool.client.post(target, data=content, headers=signed, allow_redirects=False)
            pool.answered = True
        except BaseException as exc:
            pool.slots.release()
            if not isinstance(exc, aiohttp.ClientError | TimeoutError):
                raise  # the provider could not authorize the request (no credentials), or a cancellation
            refused = isinstance(exc, aiohttp.ClientError) and _refused(exc)
            if refused and not pool.answered:  # nothing ever listened there: a wrong URL, fatal at once
                raise EndpointUnreachable(client.scrub(
                    f"{client.provider} model {client.model!r}: cannot connect to {client.safe_base_url}: "
                    "connection refused (is the server running? is the base URL right?)"), fatal=True) from None
            if attempt > client.settings.max_retries:
                lost = client._error(f"connection error: {describe(exc)}", retryable=True)
                lost.attempts = attempt
                lost.fatal = refused
                raise lost from None
            await asyncio.sleep(random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))))
            continue
        if response.status in RATE_LIMITED:
            pool.slots.rate_limited(ticket, response.status, _retry_after(response.headers))
        elif response.status < 400:
            pool.slots.answered()
        try:
            streamed = response.status == 200 and client.streams(response.headers.get("Content-Type", ""))
            if streamed:
                released = True  # the chunk iterator releases the slot
                return NativeReply(200, {}, chunks=client.relay(_chunks(response, pool)), origin=client.origin)
            data = await response.read()
            unreadable = None if counting or response.status != 200 else _unreadable(client, request.protocol, data)
            if (response.status in RETRIED or unreadable) and (attempt <= client.settings.max_retries
                                                                or rides_out(response.status, deadline)):
                wait = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))
                retry_after = _retry_after(response.headers)
                if retry_after is not None:
                    wait = max(wait, min(retry_after, RETRY_AFTER_CAP))
                await asyncio.sleep(wait)
                continue
            extra = {"x-should-retry": "false"} if attempt > 1 or response.status in RETRIED else {}
            if unreadable is not None:  # the provider's failure, past its retries: an error for the agent
                unreadable.attempts = attempt
                if attempt > 1:
                    unreadable.args = (f"{unreadable.args[0]} (after {attempt} attempts)",)
                return NativeReply(502, extra, body=data, error=unreadable, origin=client.origin)
            error: Exception | None = None
            if response.status >= 400:
                failed = client._http_error(response.status, data)
                failed.attempts = attempt
                if failed.retryable and attempt > 1:
                    failed.args = (f"{failed.args[0]} (after {attempt} attempts)",)
                error = failed
            return NativeReply(response.status, extra, body=data, error=error, origin=client.origin)
        finally:
            if not released:
                response.release()
                pool.slots.release()


def _unreadable(client: HTTPModelClient, protocol: str, data: bytes) -> ProviderError | None:
    """The error for a 200 answer that is not the protocol's answer (an HTML page, JSON of another shape)."""
    from agentcompass_models.http import answer_problem, read_json

    parsed, problem = read_json(data)
    if problem is None:
        problem = answer_problem(protocol, parsed)
    return None if problem is None else client.unreadable(200, data, problem)
