"""Loopback stand-ins for the clouds' model services, checking what the real services check.

* :class:`AzureServer`: ``/openai/deployments/NAME/chat/completions?api-version=V`` and
  ``/openai/responses?api-version=V``; the ``api-key`` header (or an Entra ID bearer token).
* :class:`BedrockServer`: ``/model/ID/{invoke,invoke-with-response-stream,converse,converse-stream,count-tokens}``;
  every request's SigV4 signature recomputed with botocore's ``SigV4Auth`` from the same credentials and
  compared; streams sent in AWS event-stream encoding (:func:`eventstream_frame`, checked by botocore's parser
  in the tests).
* :class:`VertexServer`: a token endpoint that verifies a service account's signed JWT (google-auth's token
  exchange, pointed here by the key file's ``token_uri``) and issues an access token, and Vertex's
  ``/v1/projects/P/locations/L/publishers/{google,anthropic}/models/M:METHOD`` paths that require it.

Each answers from a :class:`~agentcompass.testing.scripted_models.ScriptedModel` and records what arrived
(``requests``). Use them as ``async with`` in a test's loop, or :meth:`_Server.start_in_thread` for a run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import struct
import threading
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcompass.runtime.codecs import CODECS, SSEParser
from agentcompass.runtime.model_stream import TextDelta, ToolCallDelta, events_of
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError
from agentcompass.testing.scripted_models import ScriptedModel
from aiohttp import web

AZURE_KEY = "azure-key-0123456789abcdef"
AWS_KEY_ID = "AKIATESTKEYID0000001"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY"
AWS_SESSION = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN0123456789"
REGION = "us-east-1"


@dataclass(frozen=True)
class Arrived:
    path: str
    raw_path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: Any


def eventstream_frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message (string headers), as Bedrock frames its streams."""
    encoded = b"".join(struct.pack("B", len(k)) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode()))
                       + v.encode() for k, v in headers.items())
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(event_type: str, payload: Mapping[str, Any]) -> bytes:
    return eventstream_frame({":event-type": event_type, ":content-type": "application/json",
                              ":message-type": "event"}, json.dumps(payload).encode())


def exception(name: str, message: str) -> bytes:
    return eventstream_frame({":exception-type": name, ":content-type": "application/json",
                              ":message-type": "exception"}, json.dumps({"message": message}).encode())


def pieces(response: ChatResponse, n: int = 4) -> list[Any]:
    """The answer's stream events, text and tool arguments cut into ``n``-character pieces."""
    out: list[Any] = []
    for e in events_of(response):
        if isinstance(e, TextDelta):
            out += [TextDelta(e.text[i:i + n]) for i in range(0, len(e.text), n)] or [e]
        elif isinstance(e, ToolCallDelta):
            args = e.arguments
            out.append(ToolCallDelta(e.index, e.id, e.name, args[:n], e.kind))
            out += [ToolCallDelta(e.index, arguments=args[i:i + n], kind=e.kind) for i in range(n, len(args), n)]
        else:
            out.append(e)
    return out


class _Server:
    def __init__(self, model: ModelClient | None = None) -> None:
        self.model = model or ScriptedModel()
        self.requests: list[Arrived] = []
        #: Answers to give before the model's, one per request: (status, JSON body, headers).
        self.failures: list[tuple[int, Any, dict[str, str]]] = []
        #: Event-stream frames to send instead of a stream's end (an exception in the stream).
        self.stream_tail: bytes | None = None
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Any:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        self.routes(app)
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

    def start_in_thread(self) -> Any:
        started = threading.Event()

        def serve() -> None:
            loop = self._loop = asyncio.new_event_loop()
            loop.run_until_complete(self.__aenter__())
            started.set()
            loop.run_forever()
            loop.run_until_complete(self.__aexit__())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        started.wait(10)
        return self

    def stop_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    async def record(self, request: web.Request) -> tuple[Any, web.Response | None]:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        self.requests.append(Arrived(request.path, request.raw_path, dict(request.query), dict(request.headers),
                                     body))
        if self.failures:
            status, payload, headers = self.failures.pop(0)
            return body, web.json_response(payload, status=status, headers=headers)
        return body, None

    async def answer(self, request: web.Request, protocol: str, body: dict[str, Any], stream: bool) -> web.StreamResponse:
        """The model's answer in ``protocol`` (Anthropic, chat, Responses, Gemini), whole or as SSE."""
        codec = CODECS[protocol]
        canonical = codec.parse_request(body)
        try:
            response = await self.model.chat(canonical.messages, tools=canonical.tools or None, **canonical.params)
        except ModelError as exc:
            return web.json_response(codec.error_body(exc.status or 500, str(exc)), status=exc.status or 500)
        if not stream:
            return web.json_response(codec.render_response(response, canonical.model))
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await out.prepare(request)
        encoder = codec.encoder(canonical.model, canonical)
        await out.write(encoder.start())
        for piece in pieces(response):
            await out.write(encoder.event(piece))
        await out.write_eof()
        return out

    async def sse_events(self, protocol: str, body: dict[str, Any]) -> list[tuple[str, str]]:
        """The model's streamed answer in ``protocol`` as (event name, data) pairs."""
        codec = CODECS[protocol]
        canonical = codec.parse_request(body)
        response = await self.model.chat(canonical.messages, tools=canonical.tools or None, **canonical.params)
        encoder = codec.encoder(canonical.model, canonical)
        raw = encoder.start() + b"".join(encoder.event(p) for p in pieces(response))
        parser = SSEParser()
        return [*parser.feed(raw), *parser.close()]


# -- Azure ---------------------------------------------------------------------------------------------------------


class AzureServer(_Server):
    def __init__(self, model: ModelClient | None = None, *, api_key: str = AZURE_KEY, ad_token: str = "",
                 api_version: str = "2025-04-01-preview") -> None:
        super().__init__(model)
        self.api_key, self.ad_token, self.api_version = api_key, ad_token, api_version

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self._chat)
        app.router.add_post("/openai/responses", self._responses)

    def _refused(self, request: web.Request) -> web.Response | None:
        if request.query.get("api-version") != self.api_version:
            return web.json_response({"error": {"code": "404", "message": "Resource not found"}}, status=404)
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if request.headers.get("api-key") != self.api_key and not (self.ad_token and bearer == self.ad_token):
            return web.json_response({"error": {"code": "401", "message": "Access denied due to invalid "
                                                "subscription key or wrong API endpoint."}}, status=401)
        return None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body, failed = await self.record(request)
        refused = self._refused(request)
        if failed or refused:
            return failed or refused  # type: ignore[return-value]
        body = {**body, "model": request.match_info["deployment"]}
        return await self.answer(request, "chat", body, bool(body.get("stream")))

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        body, failed = await self.record(request)
        refused = self._refused(request)
        if failed or refused:
            return failed or refused  # type: ignore[return-value]
        return await self.answer(request, "responses", body, bool(body.get("stream")))


# -- Bedrock -------------------------------------------------------------------------------------------------------


def verify_sigv4(request: web.Request, content: bytes, key_id: str, secret: str, token: str | None,
                 region: str) -> str | None:
    """What is wrong with ``request``'s SigV4 signature (recomputed with botocore's signer), or None."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = request.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no SigV4 Authorization header"
    fields = dict(part.strip().split("=", 1) for part in auth.removeprefix("AWS4-HMAC-SHA256 ").split(","))
    scope = fields["Credential"].split("/")
    if scope[0] != key_id:
        return f"unknown access key {scope[0]}"
    if scope[2:] != [region, "bedrock", "aws4_request"]:
        return f"wrong credential scope {'/'.join(scope[1:])}"
    signed = fields["SignedHeaders"].split(";")
    if token is not None and ("x-amz-security-token" not in signed
                              or request.headers.get("X-Amz-Security-Token") != token):
        return "the session token is missing or not signed"
    for required in ("host", "x-amz-date"):
        if required not in signed:
            return f"{required} not signed"
    url = f"http://{request.host}{request.raw_path}"
    again = AWSRequest(method=request.method, url=url, data=content,
                       headers={h: request.headers[h] for h in signed if h in request.headers})
    again.context["timestamp"] = request.headers["X-Amz-Date"]
    signer = SigV4Auth(Credentials(key_id, secret, token), "bedrock", region)
    expected = signer.signature(signer.string_to_sign(again, signer.canonical_request(again)), again)
    if expected != fields["Signature"]:
        return "The request signature we calculated does not match the signature you provided."
    return None


class BedrockServer(_Server):
    def __init__(self, model: ModelClient | None = None, *, key_id: str = AWS_KEY_ID, secret: str = AWS_SECRET,
                 token: str | None = None, region: str = REGION) -> None:
        super().__init__(model)
        self.key_id, self.secret, self.token, self.region = key_id, secret, token, region
        self.verified = 0

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/model/{model}/{action}", self._model)

    async def _model(self, request: web.Request) -> web.StreamResponse:
        content = await request.read()
        body, failed = await self.record(request)
        wrong = verify_sigv4(request, content, self.key_id, self.secret, self.token, self.region)
        if wrong:
            return web.json_response({"message": wrong}, status=403,
                                     headers={"x-amzn-ErrorType": "InvalidSignatureException"})
        self.verified += 1
        if failed:
            return failed
        model, action = request.match_info["model"], request.match_info["action"]
        if action in ("invoke", "invoke-with-response-stream"):
            return await self._invoke(request, model, body, action.endswith("stream"))
        if action in ("converse", "converse-stream"):
            return await self._converse(request, model, body, action.endswith("stream"))
        if action == "count-tokens":
            inner = json.loads(body["input"]["invokeModel"]["body"])
            return web.json_response({"inputTokens": 1000 + len(json.dumps(inner)) // 10})
        return web.json_response({"message": f"unknown operation {action}"}, status=404)

    async def _invoke(self, request: web.Request, model: str, body: dict[str, Any], stream: bool
                      ) -> web.StreamResponse:
        if "model" in body or "stream" in body:
            return web.json_response({"message": "Malformed input request: extraneous key [model/stream] is not "
                                      "permitted"}, status=400, headers={"x-amzn-ErrorType": "ValidationException"})
        if body.get("anthropic_version") != "bedrock-2023-05-31":
            return web.json_response({"message": "anthropic_version must be bedrock-2023-05-31"}, status=400)
        body = {**body, "model": model}
        if not stream:
            return await self.answer(request, "anthropic", body, False)
        out = web.StreamResponse(headers={"Content-Type": "application/vnd.amazon.eventstream"})
        await out.prepare(request)
        for _, data in await self.sse_events("anthropic", {**body, "stream": True}):
            await out.write(event("chunk", {"bytes": base64.b64encode(data.encode()).decode()}))
        if self.stream_tail:
            await out.write(self.stream_tail)
        await out.write_eof()
        return out

    async def _converse(self, request: web.Request, model: str, body: dict[str, Any], stream: bool
                        ) -> web.StreamResponse:
        if "model" in body or "anthropic_version" in body:
            return web.json_response({"message": "extraneous key"}, status=400)
        messages = [{"role": "system", "content": s["text"]} for s in body.get("system") or ()]
        for m in body.get("messages") or ():
            for block in m["content"]:
                if "text" in block:
                    messages.append({"role": m["role"], "content": block["text"]})
                elif "toolUse" in block:
                    tool = block["toolUse"]
                    messages.append({"role": "assistant", "content": None, "tool_calls": [{
                        "id": tool["toolUseId"], "type": "function",
                        "function": {"name": tool["name"], "arguments": json.dumps(tool["input"])}}]})
                elif "toolResult" in block:
                    result = block["toolResult"]
                    messages.append({"role": "tool", "tool_call_id": result["toolUseId"],
                                     "content": "".join(c.get("text", "") for c in result["content"])})
        tools = [{"type": "function", "function": {"name": t["toolSpec"]["name"],
                                                   "parameters": t["toolSpec"]["inputSchema"]["json"]}}
                 for t in (body.get("toolConfig") or {}).get("tools", ())]
        response = await self.model.chat(messages, tools=tools or None)
        content: list[dict[str, Any]] = []
        if response.message.get("content"):
            content.append({"text": response.message["content"]})
        for call in response.message.get("tool_calls") or ():
            content.append({"toolUse": {"toolUseId": call["id"], "name": call["function"]["name"],
                                        "input": json.loads(call["function"]["arguments"] or "{}")}})
        stop = "tool_use" if response.message.get("tool_calls") else "end_turn"
        usage = {"inputTokens": response.usage.prompt_tokens, "outputTokens": response.usage.completion_tokens,
                 "totalTokens": response.usage.prompt_tokens + response.usage.completion_tokens}
        if not stream:
            return web.json_response({"output": {"message": {"role": "assistant", "content": content}},
                                      "stopReason": stop, "usage": usage, "metrics": {"latencyMs": 5}})
        out = web.StreamResponse(headers={"Content-Type": "application/vnd.amazon.eventstream"})
        await out.prepare(request)
        await out.write(event("messageStart", {"role": "assistant"}))
        for index, block in enumerate(content):
            if "text" in block:
                text = block["text"]
                for i in range(0, len(text), 4):
                    await out.write(event("contentBlockDelta", {"contentBlockIndex": index,
                                                                "delta": {"text": text[i:i + 4]}}))
            else:
                tool = block["toolUse"]
                await out.write(event("contentBlockStart", {"contentBlockIndex": index, "start": {
                    "toolUse": {"toolUseId": tool["toolUseId"], "name": tool["name"]}}}))
                args = json.dumps(tool["input"])
                for i in range(0, len(args), 5):
                    await out.write(event("contentBlockDelta", {"contentBlockIndex": index,
                                                                "delta": {"toolUse": {"input": args[i:i + 5]}}}))
            await out.write(event("contentBlockStop", {"contentBlockIndex": index}))
        await out.write(event("messageStop", {"stopReason": stop}))
        await out.write(event("metadata", {"usage": usage, "metrics": {"latencyMs": 5}}))
        await out.write_eof()
        return out


# -- Vertex --------------------------------------------------------------------------------------------------------


def service_account_file(path: Path, token_uri: str, project: str = "proj-test") -> tuple[Path, bytes]:
    """A service-account key file with a fresh RSA key; returns it and the public key (PEM)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    path.write_text(json.dumps({
        "type": "service_account", "project_id": project, "private_key_id": "key-1", "private_key": private,
        "client_email": f"runner@{project}.iam.gserviceaccount.com", "client_id": "1234567890",
        "token_uri": token_uri}))
    return path, public


class VertexServer(_Server):
    def __init__(self, model: ModelClient | None = None, *, project: str = "proj-test",
                 location: str = "us-central1", expires_in: int = 3600) -> None:
        super().__init__(model)
        self.project, self.location, self.expires_in = project, location, expires_in
        self.public_key: bytes = b""
        self.issued: list[str] = []

    @property
    def token_uri(self) -> str:
        return f"{self.root}/token"

    def key_file(self, path: Path) -> Path:
        written, self.public_key = service_account_file(path, self.token_uri, self.project)
        return written

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/token", self._token)
        app.router.add_post("/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{target}",
                            self._model)

    async def _token(self, request: web.Request) -> web.Response:
        from google.auth import jwt

        form = await request.post()
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        try:
            # google-auth signs for Google's token endpoint whatever token_uri it posts to, as Google expects.
            claims = jwt.decode(str(form["assertion"]), certs=self.public_key,
                                audience="https://oauth2.googleapis.com/token")
        except ValueError as exc:
            return web.json_response({"error": "invalid_grant", "error_description": str(exc)}, status=400)
        if "https://www.googleapis.com/auth/cloud-platform" not in str(claims.get("scope", "")).split():
            return web.json_response({"error": "invalid_scope"}, status=400)
        token = f"ya29.test-{secrets.token_urlsafe(24)}"
        self.issued.append(token)
        return web.json_response({"access_token": token, "expires_in": self.expires_in, "token_type": "Bearer"})

    async def _model(self, request: web.Request) -> web.StreamResponse:
        body, failed = await self.record(request)
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if bearer not in self.issued[-1:]:
            return web.json_response({"error": {"code": 401, "message": "Request had invalid authentication "
                                                "credentials.", "status": "UNAUTHENTICATED"}}, status=401)
        if failed:
            return failed
        info = request.match_info
        if (info["project"], info["location"]) != (self.project, self.location):
            return web.json_response({"error": {"code": 404, "message": "project or location not found"}},
                                     status=404)
        model, _, method = info["target"].partition(":")
        if info["publisher"] == "anthropic":
            if model == "count-tokens" and method == "rawPredict":
                return web.json_response({"input_tokens": 1000 + len(json.dumps(body)) // 10})
            if "model" in body or body.get("anthropic_version") != "vertex-2023-10-16":
                return web.json_response({"error": {"code": 400, "message": "anthropic_version must be "
                                                    "vertex-2023-10-16 and model must not be given"}}, status=400)
            if method not in ("rawPredict", "streamRawPredict"):
                return web.json_response({"error": {"code": 404, "message": f"no method {method}"}}, status=404)
            stream = method == "streamRawPredict"
            if bool(body.get("stream")) != stream:
                return web.json_response({"error": {"code": 400, "message": "stream must match the method"}},
                                         status=400)
            return await self.answer(request, "anthropic", {**body, "model": model}, stream)
        if method == "countTokens":
            return web.json_response({"totalTokens": 1000 + len(json.dumps(body)) // 10})
        stream = method == "streamGenerateContent"
        if stream and request.query.get("alt") != "sse":
            return web.json_response({"error": {"code": 400, "message": "alt=sse expected"}}, status=400)
        return await self.answer(request, "gemini", {**body, "model": model, "stream": stream}, stream)


__all__ = ["AzureServer", "BedrockServer", "VertexServer", "eventstream_frame"]
