"""A model client that talks to a run's model gateway from another process: what a remote worker's attempts
use, over one multiplexed WebSocket per worker (``GET /v1/stream``, see :mod:`agentcompass.models.gateway`).

A worker elsewhere holds no provider credential: each of its attempts reaches the head's gateway with the
attempt's token (:class:`~agentcompass.runtime.types.ModelEndpoint`), and the head meters, prices and budgets
every call. The client itself keeps no state but the worker's shared connection.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

import aiohttp
import attrs

from agentcompass.models import client_calls
from agentcompass.runtime.model_stream import StreamEvent
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError
from agentcompass.runtime.types import ModelEndpoint

#: Statuses a provider answers when every later call fails the same way.
FATAL_STATUSES = frozenset({401, 403})

#: Request headers a relay never forwards: the caller's credentials (the head's token replaces them) and the
#: hop's own framing.
DROPPED_REQUEST_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "host", "content-length",
                                     "transfer-encoding", "connection", "keep-alive", "accept-encoding"})
#: Response headers that describe one hop's framing, not the answer.
DROPPED_RESPONSE_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "date",
                                      "server", "content-encoding"})


def frame(header: Mapping[str, Any], payload: bytes = b"") -> bytes:
    """One binary message of the transport: a JSON header line, then the raw payload."""
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + payload


def unframe(data: bytes) -> tuple[dict[str, Any], bytes]:
    head, _, payload = data.partition(b"\n")
    return json.loads(head), payload


class GatewayUnreachable(ConnectionError):
    """The head's gateway cannot be reached, or its connection dropped mid-call."""


@attrs.define
class Forwarded:
    """The head's answer to one forwarded HTTP request, arriving frame by frame: its status and headers, then
    the body's chunks as the head's gateway wrote them (``chunks``). ``cancel`` (or closing ``chunks`` before
    the end) tells the head to drop the call, which closes its upstream call."""

    status: int
    headers: dict[str, str]
    _frames: asyncio.Queue[tuple[dict[str, Any], bytes]]
    _cancel: Callable[[], None]
    _done: bool = False

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        try:
            while True:
                header, payload = await self._frames.get()
                if "error" in header:
                    raise GatewayUnreachable(str(header["error"]))
                if header.get("end"):
                    self._done = True
                    return
                yield payload
        finally:
            if not self._done:
                self.cancel()

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    def cancel(self) -> None:
        if not self._done:
            self._done = True
            self._cancel()


@attrs.define
class GatewayPool:
    """One worker's connection to the head's gateway, shared by every attempt: a WebSocket per gateway that
    carries any number of HTTP requests at once (``GET /v1/stream``: far cheaper per call than a connection
    each), opened lazily on the running loop and again after it drops.

    Each request goes as one binary message (``{"id", "token", "method", "path", "headers"}`` and the body);
    the head serves it through its ordinary HTTP handlers and answers with a message carrying the status and
    headers, one per body chunk as it is written, and an end (or ``{"id", "error"}``). ``{"id", "cancel"}``
    drops a call (its client went away)."""

    timeout: float = 3600.0
    _session: aiohttp.ClientSession | None = None
    _sockets: dict[str, aiohttp.ClientWebSocketResponse] = attrs.field(factory=dict)
    _readers: dict[str, asyncio.Task[None]] = attrs.field(factory=dict)
    _pending: dict[int, tuple[str, asyncio.Queue[tuple[dict[str, Any], bytes]]]] = attrs.field(factory=dict)
    _ids: itertools.count[int] = attrs.field(factory=itertools.count)
    _opening: asyncio.Lock | None = None
    _sending: asyncio.Lock | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=60),
                connector=aiohttp.TCPConnector(limit=0, force_close=False),
            )
        return self._session

    async def _socket(self, base_url: str) -> aiohttp.ClientWebSocketResponse:
        ws = self._sockets.get(base_url)
        if ws is not None and not ws.closed:
            return ws
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            ws = self._sockets.get(base_url)
            if ws is None or ws.closed:
                ws = await self.session().ws_connect(base_url.rstrip("/") + "/stream",
                                                     max_msg_size=64 * 1024 * 1024)
                self._sockets[base_url] = ws
                self._readers[base_url] = asyncio.create_task(self._read(base_url, ws))
        return ws

    async def _read(self, base_url: str, ws: aiohttp.ClientWebSocketResponse) -> None:
        try:
            async for message in ws:
                if message.type is not aiohttp.WSMsgType.BINARY:
                    continue
                header, payload = unframe(message.data)
                call_id = int(header.get("id", -1))
                waiting = self._pending.get(call_id)
                if waiting is not None:
                    waiting[1].put_nowait((header, payload))
                    if header.get("end") or "error" in header:
                        self._pending.pop(call_id, None)
        finally:
            self._sockets.pop(base_url, None)
            for call_id, (url, frames) in list(self._pending.items()):
                if url == base_url:
                    self._pending.pop(call_id, None)
                    frames.put_nowait(({"id": call_id, "error": "the connection to the run's model gateway was "
                                        "lost"}, b""))

    async def _send(self, ws: aiohttp.ClientWebSocketResponse, data: bytes | str) -> None:
        if self._sending is None:
            self._sending = asyncio.Lock()
        async with self._sending:
            if isinstance(data, bytes):
                await ws.send_bytes(data)
            else:
                await ws.send_str(data)

    async def forward(self, base_url: str, token: str, method: str, path: str, headers: Mapping[str, str],
                      body: bytes) -> Forwarded:
        """Send one HTTP request (``path`` with its query, from the API root: ``/v1/messages``) to the gateway
        at ``base_url`` with ``token``; returns once its status and headers are in."""
        ws = await self._socket(base_url)
        call_id = next(self._ids)
        frames: asyncio.Queue[tuple[dict[str, Any], bytes]] = asyncio.Queue()
        self._pending[call_id] = (base_url, frames)
        sent = {k: v for k, v in headers.items() if k.lower() not in DROPPED_REQUEST_HEADERS}

        def cancel() -> None:
            if self._pending.pop(call_id, None) is not None and not ws.closed:
                task = asyncio.ensure_future(self._send(ws, json.dumps({"id": call_id, "cancel": True})))
                task.add_done_callback(lambda t: t.cancelled() or t.exception())

        try:
            await self._send(ws, frame({"id": call_id, "token": token, "method": method, "path": path,
                                        "headers": sent}, body))
            header, _ = await asyncio.wait_for(frames.get(), self.timeout)
        except BaseException:
            cancel()
            raise
        if "error" in header:
            raise GatewayUnreachable(str(header["error"]))
        return Forwarded(int(header.get("status") or 502), dict(header.get("headers") or {}), frames, cancel)

    async def aclose(self) -> None:
        for ws in list(self._sockets.values()):
            await ws.close()
        for reader in list(self._readers.values()):
            reader.cancel()
        self._sockets.clear()
        self._readers.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None


class GatewayClient(ModelClient):
    """Calls one role of a model gateway (over the pool's WebSocket), as a remote worker's in-process client:
    each ``chat`` / ``stream`` goes to the head with every argument as given, is made there on the attempt's
    in-process client — as the same call would be made locally — and comes back as the local call's answer,
    event by event when streamed (:mod:`agentcompass.models.client_calls`)."""

    def __init__(self, endpoint: ModelEndpoint, pool: GatewayPool) -> None:
        self.endpoint, self.pool = endpoint, pool
        self.model = endpoint.model

    async def _send(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
                    params: Mapping[str, Any], stream: bool) -> Forwarded:
        body = client_calls.request_body(self.endpoint.model, messages, tools, params, stream=stream)
        try:
            return await self.pool.forward(self.endpoint.base_url, self.endpoint.api_key, "POST",
                                           client_calls.CLIENT_PATH, {"Content-Type": "application/json"}, body)
        except (aiohttp.ClientError, ConnectionError, TimeoutError) as exc:
            raise self._unreachable(exc) from None

    def _unreachable(self, exc: BaseException) -> ModelError:
        return ModelError(f"the run's model gateway at {self.endpoint.base_url} is unreachable: "
                          f"{type(exc).__name__}: {exc}", retryable=False)

    def _refused(self, reply: Forwarded, data: bytes) -> ModelError:
        return ModelError(f"the run's model gateway at {self.endpoint.base_url} answered {reply.status}: "
                          f"{data[:300].decode(errors='replace')}", retryable=False, status=reply.status)

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        reply = await self._send(messages, tools, params, stream=False)
        try:
            data = await asyncio.wait_for(reply.read(), self.pool.timeout)
        except (aiohttp.ClientError, ConnectionError, TimeoutError) as exc:
            raise self._unreachable(exc) from None
        try:
            answer = json.loads(data)
        except ValueError:
            raise self._refused(reply, data) from None
        if reply.status != 200 or not isinstance(answer, dict) or not ("response" in answer or "error" in answer):
            raise self._refused(reply, data)
        if "error" in answer:
            raise client_calls.error_of(answer["error"])
        return client_calls.response_of(answer["response"])

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        reply = await self._send(messages, tools, params, stream=True)
        if reply.status != 200:
            raise self._refused(reply, await reply.read())
        pending = b""
        chunks = reply.chunks()
        try:
            async for chunk in chunks:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    if not raw.strip():
                        continue
                    answer = json.loads(raw)
                    if "error" in answer:
                        raise client_calls.error_of(answer["error"])
                    yield client_calls.event_of(answer["event"])
        except (aiohttp.ClientError, ConnectionError, TimeoutError) as exc:
            raise self._unreachable(exc) from None
        except ValueError:
            raise self._refused(reply, pending) from None
        finally:
            await chunks.aclose()  # a caller that stops reading drops the call at the head
