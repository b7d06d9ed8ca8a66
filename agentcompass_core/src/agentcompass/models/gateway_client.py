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
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import attrs

from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError, Usage
from agentcompass.runtime.types import ModelEndpoint

#: Statuses a provider answers when every later call fails the same way.
FATAL_STATUSES = frozenset({401, 403})


@attrs.define
class GatewayPool:
    """One worker's connection to the head's gateway, shared by every attempt: a WebSocket per gateway that
    carries any number of calls at once (``GET /v1/stream``: far cheaper per call than one HTTP request each),
    opened lazily on the running loop and again after it drops."""

    timeout: float = 3600.0
    _session: aiohttp.ClientSession | None = None
    _sockets: dict[str, aiohttp.ClientWebSocketResponse] = attrs.field(factory=dict)
    _readers: dict[str, asyncio.Task[None]] = attrs.field(factory=dict)
    _pending: dict[int, asyncio.Future[dict[str, Any]]] = attrs.field(factory=dict)
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
            async for frame in ws:
                if frame.type is not aiohttp.WSMsgType.TEXT:
                    continue
                answer = json.loads(frame.data)
                waiter = self._pending.pop(int(answer.get("id", -1)), None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(answer)
        finally:
            self._sockets.pop(base_url, None)
            for call_id, waiter in list(self._pending.items()):
                if getattr(waiter, "base_url", None) == base_url and not waiter.done():
                    self._pending.pop(call_id, None)
                    waiter.set_exception(ConnectionError("the connection to the run's model gateway was lost"))

    async def call(self, base_url: str, token: str, via: str, body: dict[str, Any]) -> tuple[int, Any]:
        """One chat completion through the gateway at ``base_url``: its status and JSON answer."""
        ws = await self._socket(base_url)
        call_id = next(self._ids)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        waiter.base_url = base_url  # type: ignore[attr-defined]
        self._pending[call_id] = waiter
        if self._sending is None:
            self._sending = asyncio.Lock()
        try:
            async with self._sending:
                await ws.send_str(json.dumps({"id": call_id, "token": token, "via": via, "body": body}))
            answer = await asyncio.wait_for(waiter, self.timeout)
        finally:
            self._pending.pop(call_id, None)
        return int(answer.get("status") or 502), answer.get("body")

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
    """Calls one role of a model gateway (over the pool's WebSocket). ``via="client"`` marks the calls as
    in-process ones (a Python harness's), so the head records them as it would with the local executor."""

    def __init__(self, endpoint: ModelEndpoint, pool: GatewayPool, *, via: str = "gateway") -> None:
        self.endpoint, self.pool, self.via = endpoint, pool, via
        self.model = endpoint.model

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        body: dict[str, Any] = {"model": self.endpoint.model, "messages": list(messages), **params}
        if tools:
            body["tools"] = list(tools)
        try:
            status, data = await self.pool.call(self.endpoint.base_url, self.endpoint.api_key, self.via, body)
        except (aiohttp.ClientError, ConnectionError, TimeoutError) as exc:
            raise ModelError(f"the run's model gateway at {self.endpoint.base_url} is unreachable: "
                             f"{type(exc).__name__}: {exc}", retryable=False) from None
        if status != 200 or not isinstance(data, dict) or not data.get("choices"):
            error = data.get("error") if isinstance(data, dict) else None
            message = error.get("message") if isinstance(error, dict) else str(data)[:500]
            raise ModelError(str(message), retryable=False, status=status, fatal=status in FATAL_STATUSES)
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        return ChatResponse(
            message=dict(choice.get("message") or {}),
            model=str(data.get("model") or self.model),
            usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
            finish_reason=str(choice.get("finish_reason") or "stop"),
        )
