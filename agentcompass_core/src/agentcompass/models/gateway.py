"""The run's model gateway: the model endpoints code running inside environments calls, in every vendor's
protocol — OpenAI chat completions (``/v1/chat/completions``), Anthropic Messages (``/v1/messages``,
``/v1/messages/count_tokens``), OpenAI Responses (``/v1/responses``), the Gemini API
(``/v1beta/models/{model}:generateContent``, ``:streamGenerateContent?alt=sse``, ``:countTokens``) and
``GET /v1/models`` in both OpenAI's and Anthropic's shapes — streamed or not.

It listens on loopback TCP (or on the address ``--gateway-host`` names, for a remote executor's workers on
other machines) and on a Unix socket (which isolated environments mount). Each task attempt gets
its own bearer token, valid only while the attempt runs; provider credentials stay in this process. Every
call goes through the attempt's metered clients, so it lands in the trajectory like an in-process call.

The attempt's token is accepted as ``Authorization: Bearer``, ``x-api-key`` (Anthropic), ``x-goog-api-key`` or
``?key=`` (Gemini; the query is never logged nor recorded).

Routing: the request's ``model`` selects the role — a role name (``agent``, ``user``, ``judge``), the model id
the role's endpoint advertises, its bare name, or an alias (``--model-alias NAME=ROLE``); any other name (the
``claude-haiku-...`` a CLI asks for on its own) goes to the ``agent`` role, and the log says so once per name.

Protocols: when the role's client takes the agent's protocol as it is (``ModelClient.native_protocols``: the
``anthropic/...`` provider for Claude Code, ``openai/...`` for Codex) the request is passed through — only the
model name and the credentials replaced, streamed end to end. Otherwise it is translated through the canonical
form (:mod:`agentcompass.protocols`) to the client's ``chat`` / ``stream``. Either way the call is metered as
one record (canonical messages, protocol, endpoint, tokens, latency, time to first token). A budget spent in
the middle of a stream ends it with the protocol's error event (the task is then ``LIMIT_REACHED``); a client
that disconnects mid-stream cancels the upstream call.

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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import attrs
from aiohttp import web

from agentcompass.errors import UsageError, describe
from agentcompass.models import client_calls, gateway_serving
from agentcompass.models.faults import serving_middleware
from agentcompass.models.gateway_client import (
    DROPPED_RESPONSE_HEADERS,
    Forwarded,
    GatewayPool,
    GatewayUnreachable,
    frame,
    unframe,
)
from agentcompass.models.gateway_serving import Grant
from agentcompass.models.metering import MeteredModel, TaskMeter
from agentcompass.redaction import Redactor
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.owned_dirs import make_owned_dir, remove_stale, socket_base
from agentcompass.runtime.types import ModelEndpoint

#: Generation settings passed to the model client when a request is translated.
PASSTHROUGH_PARAMS = gateway_serving.TRANSLATED_PARAMS


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
class ModelGateway:
    """Serve role clients in every protocol of :mod:`agentcompass.protocols`. ``start`` before use, ``stop``
    after."""

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
    #: ``--model-alias NAME=ROLE``: model names an agent asks for, by the role that answers them.
    aliases: dict[str, str] = attrs.field(factory=dict)
    #: Names already logged as sent to the agent role by default.
    _defaulted: set[str] = attrs.field(factory=set)
    #: A relay (a remote worker's gateway): every request goes as it came, over this pool's WebSocket, to the
    #: head's gateway, which serves it; the relay holds no model client and speaks no protocol itself.
    relay: GatewayPool | None = None
    #: A relay's tokens: the head's gateway (its URL) and the attempt's token there.
    _relayed: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    #: The head's own HTTP client to its Unix socket, for requests that arrive over ``/v1/stream``.
    _loopback: aiohttp.ClientSession | None = None
    #: ``--faults`` is set: the app serves every request under :func:`~agentcompass.models.faults.serving_middleware`
    #: (so a fault can drop the agent's connection); without faults no request pays for it.
    faults: bool = False

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024,
                              middlewares=[serving_middleware] if self.faults else [])
        if self.relay is not None:
            app.router.add_route("*", "/{path:.*}", self._forward)
        else:
            self._routes(app)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        tcp = web.TCPSite(self._runner, self.host, self.port)
        try:
            await tcp.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise UsageError(f"--gateway-host {self.host!r}: the model gateway cannot listen there "
                             f"({exc.strerror or exc}); give one of this machine's addresses (127.0.0.1, 0.0.0.0, "
                             "or an interface's)") from None
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

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._protocol_handler("chat", "chat/completions"))
        app.router.add_post("/v1/messages", self._protocol_handler("anthropic", "messages"))
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_post("/v1/responses", self._protocol_handler("responses", "responses"))
        app.router.add_get("/v1/models", self._models)
        app.router.add_post(r"/{version:v1beta|v1|v1alpha}/models/{target}", self._gemini)
        app.router.add_get("/v1/stream", self._multiplexed)
        app.router.add_post(client_calls.CLIENT_PATH, self._client_call)

    async def stop(self) -> None:
        self._grants.clear()
        self._relayed.clear()
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._loopback is not None:
            await self._loopback.close()
            self._loopback = None
        if self._socket_dir:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None


    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- tokens --------------------------------------------------------------------------------------

    def add_secrets(self, clients: Iterable[ModelClient]) -> None:
        """Mask the credentials ``clients`` hold in everything the gateway answers (and the run's meters)."""
        for client in clients:
            self._redactor.add(*getattr(client, "secrets", ()))

    def grant(
        self, clients: Mapping[str, ModelClient], meter: TaskMeter, base_url: str
    ) -> tuple[str, dict[str, ModelEndpoint]]:
        """Issue a token for one task attempt; returns it and one endpoint per role."""
        token = "acgw-" + secrets.token_urlsafe(24)
        self.add_secrets(clients.values())
        metered = {role: MeteredModel(client, role, meter, via="gateway") for role, client in clients.items()}
        direct = {role: MeteredModel(client, role, meter) for role, client in clients.items()}
        self._grants[token] = Grant(metered, {r: self.model_ids[r] for r in clients}, direct)
        endpoints = {
            role: ModelEndpoint(base_url=base_url, api_key=token, model=self.model_ids[role]) for role in clients
        }
        return token, endpoints

    def grant_relay(self, endpoints: Mapping[str, ModelEndpoint], base_url: str
                    ) -> tuple[str, dict[str, ModelEndpoint]]:
        """A relay's token for one task attempt whose ``endpoints`` are at the head's gateway (one URL and one
        token for all roles); returns it and the attempt's endpoints here."""
        assert self.relay is not None, "grant_relay is a relay's"
        targets = {(e.base_url, e.api_key) for e in endpoints.values()}
        assert len(targets) == 1, "an attempt's endpoints share one gateway and one token"
        token = "acgw-" + secrets.token_urlsafe(24)
        self._relayed[token] = targets.pop()
        return token, {role: ModelEndpoint(base_url=base_url, api_key=token, model=e.model)
                       for role, e in endpoints.items()}

    def revoke(self, token: str) -> None:
        self._grants.pop(token, None)
        self._relayed.pop(token, None)

    # -- handlers ------------------------------------------------------------------------------------

    @staticmethod
    def token_of(request: web.Request) -> str:
        """The request's token (``Authorization: Bearer``, ``x-api-key``, ``x-goog-api-key`` or ``?key=``)."""
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        token = (token or request.headers.get("x-api-key", "") or request.headers.get("x-goog-api-key", "")
                 or request.query.get("key", ""))
        return token.strip()

    def authorise(self, request: web.Request) -> Grant | None:
        """The grant of the request's token."""
        return self._grants.get(self.token_of(request))

    def route(self, grant: Grant, model: str) -> str | None:
        """The role answering ``model`` (see the module's docstring), or None when the grant has no agent."""
        if not model:
            return "agent" if "agent" in grant.clients else None
        role = self._role_for(grant, model)
        if role is None:
            aliased = self.aliases.get(model)
            role = aliased if aliased in grant.clients else None
        if role is None and "agent" in grant.clients:
            role = "agent"
            if model not in self._defaulted:
                self._defaulted.add(model)
                get_logger(component="gateway").info(
                    "gateway.model_defaulted", model=model, role="agent",
                    hint="name it with --model-alias NAME=ROLE to route it elsewhere")
        return role

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
        """The roles' models, in a shape both vendors' clients read (OpenAI's ``object``/``owned_by`` and
        Anthropic's ``type``/``display_name``/``has_more`` side by side)."""
        grant = self.authorise(request)
        if grant is None:
            return _error(401, "invalid or expired token", "authentication_error")
        data = [{"id": mid, "object": "model", "type": "model", "owned_by": role, "display_name": mid,
                 "created": 0, "created_at": "1970-01-01T00:00:00Z"} for role, mid in grant.model_ids.items()]
        return web.json_response({"object": "list", "data": data, "has_more": False,
                                  "first_id": data[0]["id"] if data else None,
                                  "last_id": data[-1]["id"] if data else None})

    def _protocol_handler(self, protocol: str, path: str) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await gateway_serving.serve(self, request, protocol, path)

        return handle

    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        return await gateway_serving.count_tokens(self, request)

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        return await gateway_serving.serve_gemini(self, request)

    async def _client_call(self, request: web.Request) -> web.StreamResponse:
        return await client_calls.serve(self, request)

    @property
    def redactor(self) -> Redactor:
        return self._redactor

    def _local_client(self) -> aiohttp.ClientSession:
        if self._loopback is None or self._loopback.closed:
            self._loopback = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=self.unix_socket, limit=0), auto_decompress=False,
                timeout=aiohttp.ClientTimeout(total=None))
        return self._loopback

    async def _multiplexed(self, request: web.Request) -> web.WebSocketResponse:
        """HTTP requests over one WebSocket (``GET /v1/stream``), for a remote worker's many attempts (the
        framing is :class:`~agentcompass.models.gateway_client.GatewayPool`'s). Each request is served by this
        gateway's own handlers, as if it came over HTTP with its attempt's token, and its answer goes back
        chunk by chunk as the handler writes it; a cancelled request drops the call, as a client that
        disconnects does."""
        ws = web.WebSocketResponse(max_msg_size=64 * 1024 * 1024)
        await ws.prepare(request)
        self._sockets.add(ws)
        sending = asyncio.Lock()
        calls: dict[int, asyncio.Task[None]] = {}

        async def send(header: dict[str, Any], payload: bytes = b"") -> None:
            async with sending:
                if not ws.closed:
                    await ws.send_bytes(frame(header, payload))

        async def serve(call_id: int, header: dict[str, Any], body: bytes) -> None:
            path = str(header.get("path") or "")
            try:
                if not path.startswith("/"):
                    raise ValueError(f"a forwarded request's path must start with '/', not {path[:80]!r}")
                headers = {**(header.get("headers") or {}), "Authorization": f"Bearer {header.get('token') or ''}"}
                async with self._local_client().request(str(header.get("method") or "POST"), "http://gateway" + path,
                                                        headers=headers, data=body) as reply:
                    await send({"id": call_id, "status": reply.status, "headers": {
                        k: v for k, v in reply.headers.items() if k.lower() not in DROPPED_RESPONSE_HEADERS}})
                    async for chunk in reply.content.iter_any():
                        await send({"id": call_id}, chunk)
                await send({"id": call_id, "end": True})
            except Exception as exc:
                with contextlib.suppress(Exception):
                    await send({"id": call_id, "error": self._redactor.text(describe(exc))})
            finally:
                calls.pop(call_id, None)

        try:
            async for message in ws:
                if message.type is web.WSMsgType.BINARY:
                    with contextlib.suppress(ValueError):
                        header, body = unframe(message.data)
                        call_id = int(header.get("id", -1))
                        calls[call_id] = asyncio.create_task(serve(call_id, header, body))
                elif message.type is web.WSMsgType.TEXT:
                    with contextlib.suppress(ValueError, AttributeError):
                        cancelled = json.loads(message.data)
                        if cancelled.get("cancel") and (call := calls.get(int(cancelled.get("id", -1)))):
                            call.cancel()
        finally:
            self._sockets.discard(ws)
            for call in list(calls.values()):
                call.cancel()
        return ws

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        """A relay's one handler: the request as it came (its path, query, headers and body; the attempt's
        token here replaced by its token at the head, ``?key=`` dropped) to the head's gateway, and its answer
        back chunk by chunk as it arrives. A client that goes away drops the call at the head."""
        assert self.relay is not None
        target = self._relayed.get(self.token_of(request))
        if target is None:
            return gateway_serving.refused(request.path, 401, "invalid or expired token (tokens end with their "
                                           "task attempt)", "authentication_error")
        base_url, token = target
        url = request.rel_url
        if "key" in url.query:
            url = url.with_query({k: v for k, v in url.query.items() if k != "key"})
        body = await request.read()
        try:
            reply: Forwarded = await self.relay.forward(base_url, token, request.method, str(url), request.headers,
                                                        body)
        except (aiohttp.ClientError, ConnectionError, TimeoutError) as exc:
            return gateway_serving.refused(request.path, 502, f"the run's model gateway at {base_url} is unreachable: "
                                           f"{describe(exc)}", "api_error")
        response = web.StreamResponse(status=reply.status, headers=reply.headers)
        chunks = reply.chunks()
        try:
            await response.prepare(request)
            async for chunk in chunks:
                await response.write(chunk)
            await response.write_eof()
        except (*gateway_serving.DISCONNECTED, GatewayUnreachable):
            pass  # the client went (the call is dropped at the head), or the head did: the answer ends here
        finally:
            await chunks.aclose()
            reply.cancel()
        return response


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
