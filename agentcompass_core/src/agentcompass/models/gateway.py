"""The run's model gateway: an OpenAI-compatible HTTP endpoint for code running inside environments.

It listens on loopback TCP (or on the address ``--gateway-host`` names, for a remote executor's workers on
other machines) and on a Unix socket (which isolated environments mount). Each task attempt gets
its own bearer token, valid only while the attempt runs; provider credentials stay in this process. Every
call goes through the attempt's metered clients, so it lands in the trajectory like an in-process call.

Routing: the request's ``model`` selects the role — a role name (``agent``, ``user``, ``judge``) or the
model id the role's endpoint advertises; anything else is a 404 listing what exists.

What goes back to the environment is masked of the run's provider secrets (replies and error messages alike:
a server that echoes a key must not hand it to the code under test). A failed upstream call answers with the
provider's status (502 when there was none) and ``x-should-retry: false`` once the provider has already
retried it, so that clients which honour the header (the OpenAI and Anthropic SDKs) do not multiply the
retries. What the trajectory keeps of each call is bounded: see :mod:`agentcompass.models.metering`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from aiohttp import web

from agentcompass.errors import describe
from agentcompass.models.metering import MeteredModel, TaskMeter
from agentcompass.redaction import Redactor
from agentcompass.runtime.models import ModelClient, ModelError
from agentcompass.runtime.owned_dirs import make_owned_dir, remove_stale, socket_base
from agentcompass.runtime.types import ModelEndpoint

#: Generation settings passed through to the model client.
PASSTHROUGH_PARAMS = (
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop", "tool_choice",
    "presence_penalty", "frequency_penalty", "response_format", "parallel_tool_calls",
)


#: A request header a remote worker's in-process client sets (``client``) so its calls are recorded as
#: in-process calls, as they would be with the local executor.
VIA_HEADER = "X-AgentCompass-Via"

#: The gateway's Unix socket lives in a directory named ``<prefix><run id>-XXXX`` in the temp directory.
SOCKET_DIR_PREFIX = "agentcompass-gw-"


def _error_body(status: int, message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": status}}


def _error(status: int, message: str, kind: str = "invalid_request_error",
           headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response(_error_body(status, message, kind), status=status, headers=headers)


@attrs.define
class Grant:
    """What one token may use: a task attempt's metered clients by role."""

    clients: dict[str, MeteredModel]
    model_ids: dict[str, str]
    #: The same clients, recording their calls as in-process ones (``via: client``): what a remote worker's
    #: Python harness or benchmark calls through the gateway (it says so with :data:`VIA_HEADER`).
    direct: dict[str, MeteredModel] = attrs.field(factory=dict)


@attrs.define
class ModelGateway:
    """Serve role clients over OpenAI's chat-completions protocol. ``start`` before use, ``stop`` after."""

    model_ids: dict[str, str]
    #: Names the socket directory (``agentcompass-gw-<run id>-XXXX``), so what a killed run left can be pruned.
    run_id: str = ""
    host: str = "127.0.0.1"
    port: int = 0
    unix_socket: str = ""
    _grants: dict[str, Grant] = attrs.field(factory=dict)
    #: The secrets of every client granted so far (the run's providers).
    _redactor: Redactor = attrs.field(factory=Redactor)
    _runner: web.AppRunner | None = None
    _socket_dir: str | None = None
    #: Open WebSockets of remote workers (closed by ``stop``, which would otherwise wait for them).
    _sockets: set[web.WebSocketResponse] = attrs.field(factory=set)

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/v1/stream", self._multiplexed)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        tcp = web.TCPSite(self._runner, self.host, self.port)
        await tcp.start()
        server = tcp._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        if not self.unix_socket:
            self._socket_dir = str(make_owned_dir(socket_base(), SOCKET_DIR_PREFIX, self.run_id, name_size=0))
            os.chmod(self._socket_dir, 0o755)
            self.unix_socket = os.path.join(self._socket_dir, "gateway.sock")
        unix = web.UnixSite(self._runner, self.unix_socket)
        await unix.start()
        os.chmod(self.unix_socket, 0o777)  # containers may run as another user

    async def stop(self) -> None:
        self._grants.clear()
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._socket_dir:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None


    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- tokens --------------------------------------------------------------------------------------

    def grant(
        self, clients: Mapping[str, ModelClient], meter: TaskMeter, base_url: str
    ) -> tuple[str, dict[str, ModelEndpoint]]:
        """Issue a token for one task attempt; returns it and one endpoint per role."""
        token = "acgw-" + secrets.token_urlsafe(24)
        for client in clients.values():
            self._redactor.add(*getattr(client, "secrets", ()))
        meter.redactor = self._redactor
        metered = {role: MeteredModel(client, role, meter, via="gateway") for role, client in clients.items()}
        direct = {role: MeteredModel(client, role, meter) for role, client in clients.items()}
        self._grants[token] = Grant(metered, {r: self.model_ids[r] for r in clients}, direct)
        endpoints = {
            role: ModelEndpoint(base_url=base_url, api_key=token, model=self.model_ids[role]) for role in clients
        }
        return token, endpoints

    def revoke(self, token: str) -> None:
        self._grants.pop(token, None)

    # -- handlers ------------------------------------------------------------------------------------

    def _authorise(self, request: web.Request) -> Grant | None:
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        return self._grants.get(token)

    @staticmethod
    def _role_for(grant: Grant, model: str) -> str | None:
        if model in grant.clients:
            return model
        for role, model_id in grant.model_ids.items():
            if model == model_id:
                return role
        # The bare name of a PROVIDER/NAME id (``tiny`` for ``openai/tiny``), when exactly one role has it.
        bare = [role for role, model_id in grant.model_ids.items() if model_id.partition("/")[2] == model]
        return bare[0] if len(bare) == 1 else None

    async def _models(self, request: web.Request) -> web.Response:
        grant = self._authorise(request)
        if grant is None:
            return _error(401, "invalid or expired token", "authentication_error")
        data = [{"id": mid, "object": "model", "owned_by": role} for role, mid in grant.model_ids.items()]
        return web.json_response({"object": "list", "data": data})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        grant = self._authorise(request)
        if grant is None:
            return _error(401, "invalid or expired token (tokens end with their task attempt)",
                          "authentication_error")
        try:
            body = await request.json(loads=json.loads)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "request body is not valid JSON")
        status, payload, headers = await self._answer(grant, body, request.headers.get(VIA_HEADER, "") == "client")
        if status == 200 and isinstance(body, dict) and body.get("stream"):
            choice = payload["choices"][0]
            return await self._stream(request, payload["id"], payload["created"], payload["model"],
                                      choice["message"], choice["finish_reason"], payload["usage"])
        return web.json_response(payload, status=status, headers=headers)

    async def _answer(self, grant: Grant, body: Any, via_client: bool
                      ) -> tuple[int, dict[str, Any], dict[str, str] | None]:
        """One chat completion for ``grant``: the HTTP status, the JSON answer and extra headers."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, _error_body(400, "request needs a 'messages' list"), None
        model = str(body.get("model") or "")
        role = self._role_for(grant, model) if model else "agent" if "agent" in grant.clients else None
        if role is None:
            known = sorted({*grant.clients, *grant.model_ids.values()})
            return 404, _error_body(404, f"unknown model {model!r}; this gateway serves {', '.join(known)}",
                                    "not_found_error"), None
        params = {k: body[k] for k in PASSTHROUGH_PARAMS if k in body}
        mask = self._redactor.text
        try:
            client = grant.direct[role] if via_client and role in grant.direct else grant.clients[role]
            response = await client.chat(body["messages"], tools=body.get("tools"), **params)
        except ModelError as exc:
            status = exc.status or 502
            # The provider retried already (or the error is final): a client retrying would multiply it.
            retried = not exc.retryable or int(getattr(exc, "attempts", 1) or 1) > 1
            return status, _error_body(status, mask(f"model {role!r} failed: {exc}"), "upstream_error"), (
                {"x-should-retry": "false"} if retried else None)
        except Exception as exc:  # a provider bug must not take the gateway down
            return 500, _error_body(500, mask(f"model {role!r} failed: {describe(exc)}"), "upstream_error"), None
        message = self._redactor.data(dict(response.message))
        message.setdefault("content", None)
        usage = {
            "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens,
            "total_tokens": response.usage.total_tokens,
        }
        return 200, {
            "id": "chatcmpl-" + secrets.token_hex(8),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": grant.model_ids[role],
            "choices": [{"index": 0, "message": message, "finish_reason": response.finish_reason}],
            "usage": usage,
        }, None

    async def _multiplexed(self, request: web.Request) -> web.WebSocketResponse:
        """Chat completions over one WebSocket (``GET /v1/stream``), for a remote worker's many attempts: each
        text message is ``{"id", "token", "via", "body"}`` (``body`` as for ``POST /v1/chat/completions``), each
        answer ``{"id", "status", "body", "headers"}``, in any order. Every message needs its attempt's token."""
        ws = web.WebSocketResponse(max_msg_size=64 * 1024 * 1024)
        await ws.prepare(request)
        self._sockets.add(ws)
        sending = asyncio.Lock()
        calls: set[asyncio.Task[None]] = set()

        async def answer(message: dict[str, Any]) -> None:
            grant = self._grants.get(str(message.get("token") or ""))
            if grant is None:
                reply: tuple[int, dict[str, Any], dict[str, str] | None] = (401, _error_body(
                    401, "invalid or expired token (tokens end with their task attempt)", "authentication_error"),
                    None)
            else:
                reply = await self._answer(grant, message.get("body"), message.get("via") == "client")
            status, payload, headers = reply
            async with sending:
                if not ws.closed:
                    await ws.send_str(json.dumps({"id": message.get("id"), "status": status, "body": payload,
                                                  "headers": headers or {}}))

        try:
            async for frame in ws:
                if frame.type is not web.WSMsgType.TEXT:
                    continue
                try:
                    message = json.loads(frame.data)
                except json.JSONDecodeError:
                    continue
                if isinstance(message, dict):
                    call = asyncio.create_task(answer(message))
                    calls.add(call)
                    call.add_done_callback(calls.discard)
        finally:
            self._sockets.discard(ws)
            for call in list(calls):
                call.cancel()
        return ws

    @staticmethod
    async def _stream(
        request: web.Request, cid: str, created: int, model: str, message: dict[str, Any], finish: str,
        usage: dict[str, int],
    ) -> web.StreamResponse:
        """Answer a ``stream: true`` request as server-sent events: one delta with the whole message."""
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await stream.prepare(request)
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(message["tool_calls"])]
        chunks: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
        ]
        for chunk in chunks:
            chunk.update(id=cid, object="chat.completion.chunk", created=created, model=model)
            await stream.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await stream.write(b"data: [DONE]\n\n")
        await stream.write_eof()
        return stream


def is_loopback(host: str) -> bool:
    """``host`` is a loopback address or name (the gateway is then reachable from this machine only)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def prune_socket_dirs(run_id: str | None = None) -> int:
    """Remove the socket directories of gateways whose run is gone (a SIGKILLed run); how many went."""
    bases = {Path(tempfile.gettempdir()), socket_base()}
    return sum(remove_stale(base, SOCKET_DIR_PREFIX, run_id) for base in bases)
