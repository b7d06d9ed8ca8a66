"""A model client that talks to a run's model gateway over HTTP: what a remote worker's attempts use.

A worker elsewhere holds no provider credential: each of its attempts reaches the head's gateway with the
attempt's token (:class:`~agentcompass.runtime.types.ModelEndpoint`), and the head meters, prices and budgets
every call. The client itself keeps no state but a shared connection pool.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import attrs

from agentcompass.models.gateway import VIA_HEADER
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError, Usage
from agentcompass.runtime.types import ModelEndpoint

#: Statuses a provider answers when every later call fails the same way.
FATAL_STATUSES = frozenset({401, 403})


@attrs.define
class GatewayPool:
    """One HTTP connection pool per worker, shared by every attempt's clients (open lazily, on the loop)."""

    timeout: float = 3600.0
    _session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                connector=aiohttp.TCPConnector(limit=0, force_close=False),
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class GatewayClient(ModelClient):
    """Calls one role of a model gateway. ``via="client"`` marks the calls as in-process ones (a Python
    harness's), so the head records them as it would with the local executor."""

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
        headers = {"Authorization": f"Bearer {self.endpoint.api_key}"}
        if self.via == "client":
            headers[VIA_HEADER] = "client"
        url = self.endpoint.base_url.rstrip("/") + "/chat/completions"
        try:
            async with self.pool.session().post(url, json=body, headers=headers) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ModelError(f"the run's model gateway at {self.endpoint.base_url} is unreachable: "
                             f"{type(exc).__name__}: {exc}", retryable=False) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if status != 200 or not isinstance(data, dict) or not data.get("choices"):
            error = (data or {}).get("error") if isinstance(data, dict) else None
            message = error.get("message") if isinstance(error, dict) else text[:500]
            raise ModelError(str(message), retryable=False, status=status, fatal=status in FATAL_STATUSES)
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        return ChatResponse(
            message=dict(choice.get("message") or {}),
            model=str(data.get("model") or self.model),
            usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
            finish_reason=str(choice.get("finish_reason") or "stop"),
        )
