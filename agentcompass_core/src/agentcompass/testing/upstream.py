"""A loopback provider in every protocol the gateway speaks, for tests of passthrough and translation.

:class:`LoopbackUpstream` answers ``POST /v1/chat/completions``, ``/v1/messages``, ``/v1/messages/count_tokens``,
``/v1/responses`` and Gemini's ``/v1beta/models/NAME:generateContent`` / ``:streamGenerateContent?alt=sse`` /
``:countTokens`` on ``127.0.0.1`` from a :class:`~agentcompass.testing.scripted_models.ScriptedModel` (default:
the ``mock`` policy), whole or streamed in small pieces (``piece`` characters, ``delay`` seconds apart), and
records every request as it arrived (``requests``: path, headers, JSON body) so a test can compare what reached
the provider with what the agent sent::

    async with LoopbackUpstream(ScriptedModel(scripted(tool_call("run", cmd="ls"), text("done")))) as up:
        client = make_anthropic("claude-x", settings=ProviderSettings(base_url=up.root, environ={
            "ANTHROPIC_API_KEY": up.api_key}))

It checks the key (``Authorization: Bearer``, ``x-api-key``, ``x-goog-api-key`` or ``?key=``) and answers errors
in each protocol's shape.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from agentcompass.runtime.codecs import CODECS, ProtocolError
from agentcompass.runtime.model_stream import TextDelta, ToolCallDelta, events_of
from agentcompass.runtime.models import ModelClient, ModelError
from agentcompass.testing.scripted_models import DEFAULT_API_KEY, ScriptedModel

ROUTES = {"/v1/chat/completions": "chat", "/v1/messages": "anthropic", "/v1/responses": "responses"}


@dataclass(frozen=True)
class UpstreamRequest:
    path: str
    headers: Mapping[str, str]
    body: Any


class LoopbackUpstream:
    def __init__(self, model: ModelClient | None = None, *, api_key: str = DEFAULT_API_KEY, piece: int = 8,
                 delay: float = 0.0) -> None:
        self.model = model or ScriptedModel()
        self.api_key = api_key
        self.piece = max(1, piece)
        self.delay = delay
        self.requests: list[UpstreamRequest] = []
        #: Streams whose client went away before the end (the gateway cancelled them).
        self.cancelled = 0
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def root(self) -> str:
        """The API root (Anthropic-style base URL)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (ends in ``/v1``)."""
        return f"{self.root}/v1"

    async def __aenter__(self) -> LoopbackUpstream:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for path in ROUTES:
            app.router.add_post(path, self._handle)
        app.router.add_post("/v1/messages/count_tokens", self._count)
        app.router.add_post(r"/{version:v1beta|v1|v1alpha}/models/{target}", self._gemini)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _authorised(self, request: web.Request) -> bool:
        bearer = request.headers.get("Authorization", "")
        return self.api_key in (bearer.removeprefix("Bearer "), request.headers.get("x-api-key"),
                                request.headers.get("x-goog-api-key"), request.query.get("key"))

    async def _count(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(UpstreamRequest(request.path, dict(request.headers), body))
        count = 1000 + len(json.dumps(body)) // 10
        return web.json_response({"totalTokens": count} if "/models/" in request.path else {"input_tokens": count})

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        model, _, method = request.match_info["target"].partition(":")
        if method == "countTokens":
            return await self._count(request)
        body = await request.json()
        self.requests.append(UpstreamRequest(request.path, dict(request.headers), body))
        stream = method == "streamGenerateContent" and request.query.get("alt") == "sse"
        return await self._answer(request, "gemini", {**body, "model": model, "stream": stream})

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(UpstreamRequest(request.path, dict(request.headers), body))
        return await self._answer(request, ROUTES[request.path], body)

    async def _answer(self, request: web.Request, protocol: str, body: Any) -> web.StreamResponse:
        codec = CODECS[protocol]
        if not self._authorised(request):
            return web.json_response(codec.error_body(401, "invalid api key"), status=401)
        try:
            canonical = codec.parse_request(body)
            response = await self.model.chat(canonical.messages, tools=canonical.tools or None, **canonical.params)
        except ProtocolError as exc:
            return web.json_response(codec.error_body(exc.status, str(exc)), status=exc.status)
        except ModelError as exc:
            status = exc.status or 500
            return web.json_response(codec.error_body(status, str(exc)), status=status)
        model = canonical.model
        if not canonical.stream:
            return web.json_response(codec.render_response(response, model))
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        encoder = codec.encoder(model, canonical)
        try:
            await stream.write(encoder.start())
            for event in events_of(response):
                for piece in self._pieces(event):
                    await stream.write(encoder.event(piece))
                    if self.delay:
                        await asyncio.sleep(self.delay)
            await stream.write_eof()
        except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
            self.cancelled += 1
            raise
        return stream

    def _pieces(self, event: Any) -> list[Any]:
        n = self.piece
        if isinstance(event, TextDelta):
            return [TextDelta(event.text[i:i + n]) for i in range(0, len(event.text), n)] or [event]
        if isinstance(event, ToolCallDelta):
            args = event.arguments
            first = ToolCallDelta(event.index, event.id, event.name, args[:n], event.kind)
            return [first] + [ToolCallDelta(event.index, arguments=args[i:i + n], kind=event.kind)
                              for i in range(n, len(args), n)]
        return [event]
