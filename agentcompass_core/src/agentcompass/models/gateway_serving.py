"""How the gateway answers one request in a vendor protocol: translated through the canonical form to the
role client's ``chat`` / ``stream``, or passed through to its ``native`` when the client speaks the protocol.

Split from :mod:`agentcompass.models.gateway` (tokens, routes, sockets) so that each module has one job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

import attrs
from aiohttp import web

from agentcompass.errors import describe
from agentcompass.models.budget import LimitReached
from agentcompass.models.metering import MeteredCall, MeteredModel
from agentcompass.protocols import CODECS, CanonicalRequest, Codec, ProtocolError, UpstreamStreamError
from agentcompass.protocols.shared import require
from agentcompass.protocols.sse import SSEParser, last_boundary
from agentcompass.redaction import Redactor
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.model_stream import NativeReply, NativeRequest, StreamEnd, events_of
from agentcompass.runtime.models import ModelError


@attrs.define
class Grant:
    """What one token may use: a task attempt's metered clients by role."""

    clients: dict[str, MeteredModel]
    model_ids: dict[str, str]
    #: The same clients, recording their calls as in-process ones (``via: client``): what a remote worker's
    #: Python harness or benchmark calls through the gateway (it says so with :data:`VIA_HEADER`).
    direct: dict[str, MeteredModel] = attrs.field(factory=dict)
    #: The attempt's translated Responses answers by id: the conversation up to and with each (what a request
    #: naming it as ``previous_response_id`` continues), the latest :data:`KEPT_RESPONSES`.
    responses: dict[str, list[dict[str, Any]]] = attrs.field(factory=dict)

    def remember(self, response_id: str, conversation: list[dict[str, Any]]) -> None:
        self.responses[response_id] = conversation
        while len(self.responses) > KEPT_RESPONSES:
            del self.responses[next(iter(self.responses))]


#: How many Responses answers an attempt keeps for ``previous_response_id``.
KEPT_RESPONSES = 64
Remember = Callable[[str, Mapping[str, Any]], None]



class ModelGateway(Protocol):
    """What serving needs of the gateway (:class:`agentcompass.models.gateway.ModelGateway`)."""

    @property
    def redactor(self) -> Redactor: ...

    def authorise(self, request: web.Request) -> Grant | None: ...

    def route(self, grant: Grant, model: str) -> str | None: ...

#: Generation settings (canonical names) passed to a client's ``chat`` / ``stream`` when translating; the
#: vendor-only ones (``thinking``, ``top_k``, ``metadata``, ``reasoning_effort``) are dropped.
TRANSLATED_PARAMS = (
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop", "tool_choice",
    "presence_penalty", "frequency_penalty", "response_format", "parallel_tool_calls",
)
#: Request headers forwarded to a provider on passthrough (never credentials).
FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")
#: A header a remote worker's in-process client sets (see ``gateway.VIA_HEADER``).
VIA_HEADER = "X-AgentCompass-Via"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
#: Errors of a client that went away while its answer streamed.
DISCONNECTED = (ConnectionResetError, ConnectionError)


def _json(codec: Codec, status: int, message: str, kind: str | None = None,
          headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response(codec.error_body(status, message, kind), status=status, headers=headers)


def _failure(gateway: ModelGateway, codec: Codec, role: str, exc: BaseException
             ) -> tuple[int, dict[str, Any], dict[str, str] | None]:
    """A failed model call as the protocol's error answer (masked of the run's secrets)."""
    mask = gateway.redactor.text
    if isinstance(exc, ModelError):
        status = exc.status or 502
        retried = not exc.retryable or int(getattr(exc, "attempts", 1) or 1) > 1
        kind = "rate_limit_error" if isinstance(exc, LimitReached) else None
        headers = {"x-should-retry": "false"} if retried else {}
        retry_after = getattr(exc, "retry_after", None)  # an injected 429's (--faults)
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        return status, codec.error_body(status, mask(f"model {role!r} failed: {exc}"), kind), headers or None
    return 500, codec.error_body(500, mask(f"model {role!r} failed: {describe(exc)}"), "api_error"), None


_DROPPED_LOGGED: set[tuple[str, str]] = set()


def _log_dropped(protocol: str, dropped: tuple[str, ...]) -> None:
    """Say once per process what translation leaves out of a protocol's requests (a tool type, a block)."""
    new = sorted({d for d in dropped if (protocol, d) not in _DROPPED_LOGGED})
    if new:
        _DROPPED_LOGGED.update((protocol, d) for d in new)
        get_logger(component="gateway").info("gateway.translation_dropped", protocol=protocol, dropped=new)


def protocol_of(path: str) -> str:
    """The protocol a request to ``path`` (from the API root) speaks, for answering it before it is served."""
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith("/v1/responses"):
        return "responses"
    return "gemini" if "/models/" in path else "chat"


def refused(path: str, status: int, message: str, kind: str) -> web.Response:
    """An error answer to a request for ``path``, in its protocol's shape."""
    return _json(CODECS[protocol_of(path)], status, message, kind)


def endpoint_of(protocol: str, path: str) -> str:
    """The endpoint a call records: the path the agent called (without the query, which may hold a key)."""
    return f"/{path}" if protocol == "gemini" else f"/v1/{path}"  # Gemini's paths hold their API version


def _params(request: CanonicalRequest) -> dict[str, Any]:
    return {k: v for k, v in request.params.items() if k in TRANSLATED_PARAMS}


async def _body(request: web.Request) -> Any:
    try:
        return await request.json(loads=json.loads)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ProtocolError("request body is not valid JSON") from None


async def answer(gateway: ModelGateway, grant: Grant, protocol: str, path: str, body: Any, via_client: bool,
                 canonical: CanonicalRequest | None = None, remember: Remember | None = None
                 ) -> tuple[int, dict[str, Any], dict[str, str] | None]:
    """A whole (not streamed) answer, translated: status, JSON body, extra headers. ``canonical`` is the
    request already read; ``remember(id, message)`` is told the answer (Responses' ``previous_response_id``)."""
    codec = CODECS[protocol]
    try:
        canonical = canonical or codec.parse_request(body)
    except ProtocolError as exc:
        return exc.status, codec.error_body(exc.status, str(exc), exc.kind), None
    role = gateway.route(grant, canonical.model)
    if role is None:
        return 404, codec.error_body(404, f"unknown model {canonical.model!r}; this gateway serves "
                                     f"{', '.join(sorted({*grant.clients, *grant.model_ids.values()}))}"), None
    client = grant.direct[role] if via_client and role in grant.direct else grant.clients[role]
    try:
        response = await client.chat(canonical.messages, tools=canonical.tools or None, protocol=protocol,
                                     endpoint=endpoint_of(protocol, path), **_params(canonical))
    except Exception as exc:
        return _failure(gateway, codec, role, exc)
    rendered = codec.render_response(response, grant.model_ids[role])
    if remember is not None and rendered.get("id"):
        remember(str(rendered["id"]), response.message)
    return 200, gateway.redactor.data(rendered), None


@attrs.frozen
class UrlFacts:
    """What a protocol says in the URL rather than the body (Gemini: the model, streaming, ``alt=sse``)."""

    model: str
    stream: bool
    query: Mapping[str, str] = attrs.field(factory=dict)
    version: str = "v1beta"


async def serve(gateway: ModelGateway, request: web.Request, protocol: str, path: str,
                url: UrlFacts | None = None) -> web.StreamResponse:
    codec = CODECS[protocol]
    grant = gateway.authorise(request)
    if grant is None:
        return _json(codec, 401, "invalid or expired token (tokens end with their task attempt)",
                     "authentication_error")
    try:
        body = await _body(request)
        require(isinstance(body, Mapping), "the request body must be a JSON object")
    except ProtocolError as exc:
        return _json(codec, exc.status, str(exc), exc.kind)
    model = url.model if url is not None else str(body.get("model") or "")
    role = gateway.route(grant, model)
    if role is None:
        return _json(codec, 404, f"unknown model {model!r}", "not_found_error")
    via_client = request.headers.get(VIA_HEADER, "") == "client"
    client = grant.direct[role] if via_client and role in grant.direct else grant.clients[role]
    if protocol in client.inner.native_protocols:
        # Passed through at once: the canonical form (for the record) is read after the answer has streamed.
        stream = url.stream if url is not None else bool(body.get("stream"))
        native = NativeRequest(protocol, path, body, {h: request.headers[h] for h in FORWARDED_HEADERS
                                                      if h in request.headers}, stream,
                               dict(url.query) if url is not None else {})
        return await _passthrough(gateway, request, codec, client, native, role, url)
    if url is not None:
        body = {**body, "model": url.model, "stream": url.stream}
    history: list[dict[str, Any]] = []
    previous = body.get("previous_response_id") if protocol == "responses" else None
    if previous:
        if str(previous) not in grant.responses:
            return _json(codec, 400, f"previous_response_id {str(previous)[:80]!r} is not a response of this task "
                         "attempt: the gateway keeps the responses of the running attempt only (or send the whole "
                         "conversation as input, with store: false, as Codex does)")
        history = grant.responses[str(previous)]
        body = {k: v for k, v in body.items() if k != "previous_response_id"}
    try:
        canonical = codec.parse_request(body)
    except ProtocolError as exc:
        return _json(codec, exc.status, str(exc), exc.kind)
    if canonical.dropped:
        _log_dropped(protocol, canonical.dropped)
    remember: Remember | None = None
    if protocol == "responses":  # what a later previous_response_id continues: the conversation and the answer
        lead = 1 if body.get("instructions") else 0  # instructions are not carried over (as OpenAI does)
        conversation = [*history, *canonical.messages[lead:]]
        canonical = dataclasses.replace(canonical, messages=canonical.messages[:lead] + conversation)

        def remember(response_id: str, message: Mapping[str, Any]) -> None:
            grant.remember(response_id, [*conversation, dict(message)])

    if not canonical.stream:
        status, payload, headers = await answer(gateway, grant, protocol, path, body, via_client, canonical,
                                                remember)
        return web.json_response(payload, status=status, headers=headers)
    return await _stream_translated(gateway, request, codec, canonical, client, role, grant.model_ids[role], path,
                                    remember)


async def _stream_translated(gateway: ModelGateway, request: web.Request, codec: Codec, canonical: CanonicalRequest,
                             client: MeteredModel, role: str, model_id: str, path: str,
                             remember: Remember | None = None) -> web.StreamResponse:
    mask, masked = gateway.redactor.text, gateway.redactor.mask_bytes
    events = client.stream(canonical.messages, tools=canonical.tools or None, protocol=codec.name,
                           endpoint=endpoint_of(codec.name, path), **_params(canonical))
    async with contextlib.aclosing(events):
        try:  # the first piece before any byte: a call refused at once is an HTTP error, not a broken stream
            first = await anext(events)
        except Exception as exc:
            status, payload, headers = _failure(gateway, codec, role, exc)
            return web.json_response(payload, status=status, headers=headers)
        encoder = codec.encoder(model_id, canonical)
        stream = web.StreamResponse(headers=SSE_HEADERS)
        await stream.prepare(request)
        try:
            await stream.write(encoder.start() + masked(encoder.event(first)))
            last = first
            async for event in events:
                last = event
                await stream.write(masked(encoder.event(event)))
            if remember is not None and isinstance(last, StreamEnd) and getattr(encoder, "id", None):
                remember(str(encoder.id), last.response.message)  # type: ignore[attr-defined]
        except DISCONNECTED:
            return stream  # closing ``events`` cancels the upstream call
        except Exception as exc:
            kind = "rate_limit_error" if isinstance(exc, LimitReached) else "api_error"
            message = str(exc) if isinstance(exc, ModelError) else describe(exc)
            with contextlib.suppress(*DISCONNECTED):
                await stream.write(encoder.error(mask(f"model {role!r} failed: {message}"), kind))
        with contextlib.suppress(*DISCONNECTED):
            await stream.write_eof()
        return stream


def _canonical(codec: Codec, native: NativeRequest, url: UrlFacts | None) -> CanonicalRequest:
    """The canonical form of a passed-through request, for its record (empty when the codec cannot read
    it: the provider, not the gateway, judges a request it passes through)."""
    body = native.body if url is None else {**native.body, "model": url.model, "stream": url.stream}
    try:
        return codec.parse_request(body)
    except ProtocolError:
        return CanonicalRequest(messages=[], stream=native.stream)


async def _passthrough(gateway: ModelGateway, request: web.Request, codec: Codec, client: MeteredModel,
                       native: NativeRequest, role: str, url: UrlFacts | None) -> web.StreamResponse:
    """Send the agent's request to a provider of its own protocol; meter what comes back. The request's
    canonical form is read for the record only once the answer is in (it is not on the way to the first
    token)."""
    mask = gateway.redactor.text
    try:
        call = client.begin([], None, protocol=codec.name, endpoint=endpoint_of(codec.name, native.path),
                            stream=native.stream, passthrough=True)
    except Exception as exc:
        status, payload, headers = _failure(gateway, codec, role, exc)
        return web.json_response(payload, status=status, headers=headers)

    def read() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        canonical = _canonical(codec, native, url)
        return canonical.messages, canonical.tools, canonical.params

    call.describe_later(read)
    try:
        reply = await client.inner.native(native)
    except BaseException as exc:
        call.fail(exc)
        if not isinstance(exc, Exception):
            raise
        status, payload, headers = _failure(gateway, codec, role, exc)
        return web.json_response(payload, status=status, headers=headers)
    call.note(reply.metadata)
    if reply.chunks is None and reply.status == 200 and native.stream:
        return await _stream_whole(gateway, request, codec, _canonical(codec, native, url), call, reply, role)
    if reply.chunks is None or reply.status != 200:
        return await _whole(gateway, codec, call, reply, role)
    return await _relay_stream(gateway, request, codec, call, reply, role, mask)


async def _stream_whole(gateway: ModelGateway, request: web.Request, codec: Codec, canonical: CanonicalRequest,
                        call: MeteredCall, reply: NativeReply, role: str) -> web.StreamResponse:
    """A provider that answered a streamed request whole: its answer, streamed in the agent's protocol."""
    mask = gateway.redactor.text
    text = mask(reply.body.decode("utf-8", errors="replace"))
    response = _read_answer(codec, reply, text)
    if isinstance(response, ModelError):
        call.fail(response)
        status, payload, headers = _failure(gateway, codec, role, response)
        return web.json_response(payload, status=status, headers=headers)
    call.finish(response)
    encoder = codec.encoder(response.model or call.record.model, canonical)
    stream = web.StreamResponse(headers=SSE_HEADERS)
    await stream.prepare(request)
    with contextlib.suppress(*DISCONNECTED):
        await stream.write(encoder.start() + b"".join(encoder.event(e) for e in events_of(response)))
        await stream.write_eof()
    return stream


def call_error(call: MeteredCall) -> ModelError:
    return ModelError(call.record.error or "the provider's answer could not be read", status=502)


#: Characters of an unreadable answer quoted in its error (masked before they are cut).
QUOTED_CHARS = 160


def unreadable(reply: NativeReply, what: str, said: str) -> ModelError:
    """The provider answered (``reply``) with something the gateway cannot read — ``what`` ("a body that is not
    JSON", ...), ``said`` (masked already) — the provider's failure, like a 5xx: retryable, so an outage. One
    line naming who answered and quoting the start of the answer."""
    text = " ".join(said.split())
    quoted = text[:QUOTED_CHARS] + ("..." if len(text) > QUOTED_CHARS else "")
    return ModelError(f"{reply.origin or 'the provider'}: answered HTTP {reply.status} with {what}: {quoted!r}",
                      retryable=True)


def _read_answer(codec: Codec, reply: NativeReply, text: str) -> Any:
    """The answer in ``text`` (the masked body of a 200), or the :func:`unreadable` error saying why not."""
    try:
        data = json.loads(text)
    except ValueError:
        return unreadable(reply, "a body that is not JSON", text)
    try:
        return codec.parse_response(data)
    except Exception as exc:  # the codec's complaint, or what an odd shape made it trip on
        return unreadable(reply, f"JSON that is not the protocol's answer ({_why(exc)})", text)


def _why(exc: Exception) -> str:
    return str(exc) if isinstance(exc, ProtocolError) else describe(exc)


def _feed(decoder: Any, reply: NativeReply, name: str, data: str, mask: Any) -> list[Any]:
    """``decoder.feed`` of one relayed event; an event it cannot read is the provider's :func:`unreadable`."""
    try:
        return decoder.feed(name, data)
    except ModelError:  # the provider's error event (relayed already), or a budget
        raise
    except Exception as exc:
        what = ("an event that is not JSON" if isinstance(exc, json.JSONDecodeError)
                else f"an event that cannot be read ({_why(exc)})")
        raise unreadable(reply, f"an event stream holding {what}", mask(data)) from None


async def _whole(gateway: ModelGateway, codec: Codec, call: MeteredCall, reply: NativeReply, role: str
                 ) -> web.Response:
    body = reply.body
    if reply.chunks is not None:  # an error answer that came as a stream
        body = b"".join([chunk async for chunk in reply.chunks])
    text = gateway.redactor.text(body.decode("utf-8", errors="replace"))
    if reply.status == 200:
        response = _read_answer(codec, reply, text)
        if isinstance(response, ModelError):  # never relayed as if it were an answer: the agent gets the error
            call.fail(response)
            status, payload, headers = _failure(gateway, codec, role, response)
            return web.json_response(payload, status=status, headers=headers)
        call.finish(response)
    else:
        call.fail(reply.error or ModelError(f"the provider answered HTTP {reply.status}: {text[:500]}",
                                            status=reply.status, fatal=reply.status in (401, 403)))
    headers = {k: v for k, v in reply.headers.items() if k.lower() in ("retry-after", "x-should-retry")}
    if reply.status >= 400 and reply.error is not None:  # the provider's reading, in the agent's protocol
        text = json.dumps(codec.error_body(reply.status, gateway.redactor.text(f"model {role!r} failed: "
                                                                               f"{reply.error}")))
    return web.Response(body=text.encode(), status=reply.status, headers=headers, content_type="application/json")


async def _relay_stream(gateway: ModelGateway, request: web.Request, codec: Codec, call: MeteredCall,
                        reply: NativeReply, role: str, mask: Any) -> web.StreamResponse:
    """Relay a provider's event stream as it comes, whole events at a time (masked, not re-encoded).

    Metering reads the events only as far as it must while they stream: up to the first piece of the answer
    (the time to first token), and all of them when a task token budget counts the answer as it grows.
    Otherwise the rest is relayed as it comes — each buffer of whole events masked by one pass over its bytes,
    no event parsed — and read once the stream has ended, for the record. The first events are read before
    anything is sent: a stream that cannot be read from its start (garbage under an event-stream header) is
    answered with the protocol's error, naming the provider and what it sent, not relayed."""
    assert reply.chunks is not None
    decoder = codec.decoder(call.record.model)
    parser = SSEParser()
    stream = web.StreamResponse(headers=SSE_HEADERS)
    mask_bytes = gateway.redactor.mask_bytes

    async def send(data: bytes) -> None:
        if not stream.prepared:
            await stream.prepare(request)
        await stream.write(mask_bytes(data))

    chunks: AsyncIterator[bytes] = reply.chunks
    counting = call.counts_pieces
    later: list[bytes] = []  # what is read for the record after the stream
    pending = b""

    def streamed_chars() -> int:
        """The answer's characters relayed so far (read now: the call is being cut before its end)."""
        for name, data in parser.feed(b"".join(later)):
            decoder.feed(name, data)
        later.clear()
        return decoder.assembler.chars

    call.measure_with(streamed_chars)
    try:
        async with contextlib.aclosing(chunks):  # type: ignore[type-var]
            started = False
            async for chunk in chunks:  # read as it is relayed: up to the first piece, or all when counting
                pending += chunk
                cut = last_boundary(pending)
                if cut <= 0:
                    continue
                events, pending = pending[:cut], pending[cut:]
                try:
                    for name, data in parser.feed(events):
                        if _feed(decoder, reply, name, data, mask) and not started:
                            started = True
                            call.first_piece()
                except UpstreamStreamError:  # the provider's error event: relayed as it sent it
                    await send(events)
                    raise
                await send(events)
                call.progress(decoder.assembler.chars)
                if started and not counting:
                    break
            write = stream.write
            async for chunk in chunks:  # the rest (the same iterator, where the loop above left it): relayed
                if pending:
                    chunk, pending = pending + chunk, b""
                if not chunk.endswith(b"\n\n"):  # (the usual chunk ends with its last event)
                    cut = last_boundary(chunk)
                    if cut <= 0:
                        pending = chunk
                        continue
                    chunk, pending = chunk[:cut], chunk[cut:]
                await write(mask_bytes(chunk))
                later.append(chunk)
                call.progress(0)  # the run's stop
            if pending:  # a stream that ended without a blank line
                await send(pending)
                later.append(pending)
        tail = parser.feed(b"".join(later)) + parser.close()
    except DISCONNECTED:
        call.cut("the client disconnected in the middle of the stream")
        return stream
    except UpstreamStreamError as exc:  # the provider's error event: relayed already
        call.fail(exc)
        tail = []
    except Exception as exc:
        call.fail(exc)
        if not stream.prepared:  # nothing sent yet: the protocol's error answer rather than a stream
            status, payload, headers = _failure(gateway, codec, role, exc)
            return web.json_response(payload, status=status, headers=headers)
        kind = "rate_limit_error" if isinstance(exc, LimitReached) else "api_error"
        encoder = codec.encoder(call.record.model, CanonicalRequest(messages=[]))
        with contextlib.suppress(*DISCONNECTED):
            await stream.write(encoder.error(mask(f"model {role!r} failed: {exc}"), kind))
            await stream.write_eof()
        return stream
    except BaseException as exc:  # the gateway stopping: the call is cut, with what streamed so far
        call.fail(exc)
        raise
    try:  # the rest of the answer, for the record (the agent has it already, error events included)
        for name, data in tail:
            _feed(decoder, reply, name, data, mask)
        call.finish(decoder.end().response)
    except Exception as exc:
        call.fail(exc)
    with contextlib.suppress(*DISCONNECTED):
        if not stream.prepared:
            await stream.prepare(request)
        await stream.write_eof()
    return stream


def estimate_tokens(canonical: CanonicalRequest) -> int:
    """A rough count (about four characters a token) for ``count_tokens`` when the provider cannot count."""
    size = len(json.dumps(canonical.messages, ensure_ascii=False)) + len(json.dumps(canonical.tools))
    return max(1, size // 4)


async def count_tokens(gateway: ModelGateway, request: web.Request, protocol: str = "anthropic",
                       url: UrlFacts | None = None) -> web.StreamResponse:
    """``POST /v1/messages/count_tokens`` (or Gemini's ``:countTokens``): the provider's count when it speaks
    the protocol, else an estimate."""
    codec = CODECS[protocol]
    grant = gateway.authorise(request)
    if grant is None:
        return _json(codec, 401, "invalid or expired token (tokens end with their task attempt)",
                     "authentication_error")
    try:
        body = await _body(request)
        if not isinstance(body, dict):
            raise ProtocolError("the request body must be a JSON object")
        if protocol == "gemini":
            inner_body = body.get("generateContentRequest") or {"contents": body.get("contents") or []}
            canonical = codec.parse_request({**inner_body, "model": url.model if url else ""})
            path = f"{url.version if url else 'v1beta'}/models/{url.model if url else ''}:countTokens"
        else:
            canonical = codec.parse_request({**body, "max_tokens": 1})
            path = "messages/count_tokens"
    except ProtocolError as exc:
        return _json(codec, exc.status, str(exc), exc.kind)
    role = gateway.route(grant, canonical.model)
    inner = grant.clients[role].inner if role is not None else None
    if inner is not None and protocol in inner.native_protocols:
        try:
            reply = await inner.native(NativeRequest(protocol, path, body, {
                h: request.headers[h] for h in FORWARDED_HEADERS if h in request.headers}))
        except ModelError as exc:
            return _json(codec, exc.status or 502, gateway.redactor.text(str(exc)))
        return web.Response(body=gateway.redactor.text(reply.body.decode()).encode(), status=reply.status,
                            content_type="application/json")
    count = estimate_tokens(canonical)
    return web.json_response({"totalTokens": count} if protocol == "gemini" else {"input_tokens": count})


#: The Gemini methods (``models/NAME:METHOD``) the gateway answers.
GEMINI_METHODS = ("generateContent", "streamGenerateContent", "countTokens")


async def serve_gemini(gateway: ModelGateway, request: web.Request) -> web.StreamResponse:
    """``POST /v1beta/models/{model}:{method}``: Gemini's generate, streamed generate (``alt=sse``) and count."""
    model, _, method = request.match_info["target"].partition(":")
    version = request.match_info.get("version", "v1beta")
    codec = CODECS["gemini"]
    if method not in GEMINI_METHODS:
        return _json(codec, 404, f"unknown Gemini method {method!r}: this gateway answers "
                     f"{', '.join(GEMINI_METHODS)}")
    if method == "countTokens":
        return await count_tokens(gateway, request, "gemini", UrlFacts(model, False, version=version))
    stream = method == "streamGenerateContent"
    if stream and request.query.get("alt") != "sse":
        return _json(codec, 400, "streamGenerateContent needs ?alt=sse here (server-sent events); the JSON-array "
                     "stream is not served")
    query = {"alt": "sse"} if stream else {}
    return await serve(gateway, request, "gemini", f"{version}/models/{model}:{method}",
                       UrlFacts(model, stream, query, version))
