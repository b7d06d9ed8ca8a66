"""A local stand-in for a model server: OpenAI chat completions and Anthropic Messages on loopback.

It answers like the built-in ``mock`` model (so benchmarks behave as they do offline), and can be scripted
to misbehave, which is what the provider tests and ``bench/`` use::

    server = FakeModelServer(latency=0.1, api_keys={"sk-test"}, models={"tiny"})
    server.start_in_thread()                       # or: await server.start()
    server.script.append({"status": 429, "headers": {"Retry-After": "1"}})
    ... OPENAI_BASE_URL=server.base_url ...
    server.stop_thread()

Script actions, consumed one per request in order: ``{"status": N, "headers": {...}, "message": "..."}`` (an
error answer), ``{"delay": seconds}`` (answer late), ``{"malformed": true}`` (a 200 whose body is not JSON),
``{"reply": {...assistant message...}}`` (a fixed answer), ``{"drop": true}`` (close the connection), and
garbage a misconfigured server or proxy answers with: ``{"garbage": "<html>..."}`` (a 200 with that text as
``text/html``), ``{"json": {...}}`` (a 200 with that JSON, of whatever shape), ``{"broken_stream": true}`` (a
200 event stream whose first event is not JSON).

Leaks, for the secret-masking tests: ``leak_key=True`` makes replies repeat the caller's key (and, with
``leak_encodings=True``, its base64, basic-auth and URL-encoded forms); ``echo_key_at=N`` makes the 401 for a
wrong key quote it at offset N of a long message, as some providers quote the request back.

From a shell: ``python -m tests.models.fake_server --port 8000 --latency 0.1`` prints its base URL.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote_plus

from agentcompass.testing import MockModel, count_tokens
from aiohttp import web


def _openai_error(status: int, message: str, kind: str, code: str | None = None,
                  headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": code}}, status=status,
                             headers=dict(headers or {}))


def _anthropic_error(status: int, message: str, kind: str,
                     headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response({"type": "error", "error": {"type": kind, "message": message}}, status=status,
                             headers=dict(headers or {}))


def _anthropic_to_openai(body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": str(body["system"])})
    for m in body.get("messages") or ():
        content = m.get("content")
        if isinstance(content, str):
            messages.append({"role": m.get("role"), "content": content})
            continue
        texts = []
        calls = []
        for block in content or ():
            if block.get("type") == "text":
                texts.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                messages.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                                 "content": block.get("content") if isinstance(block.get("content"), str)
                                 else json.dumps(block.get("content"))})
            elif block.get("type") == "tool_use":
                calls.append({"id": block.get("id"), "type": "function",
                              "function": {"name": block.get("name"), "arguments": json.dumps(block.get("input"))}})
        if texts or calls:
            msg: dict[str, Any] = {"role": m.get("role"), "content": "".join(texts) or None}
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
    tools = [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description", ""),
                                               "parameters": t.get("input_schema") or {}}}
             for t in body.get("tools") or ()]
    return messages, tools


class FakeModelServer:
    """See the module docstring. ``requests`` records every request (path, headers of interest, body)."""

    def __init__(self, *, latency: float = 0.0, api_keys: Iterable[str] = (), models: Iterable[str] = (),
                 leak_key: bool = False, host: str = "127.0.0.1", port: int = 0, record: bool = True,
                 fixed_reply: str | None = None, leak_encodings: bool = False,
                 echo_key_at: int | None = None) -> None:
        self.latency = latency
        #: Answer every request with this text instead of the mock policy (cheapest, for load tests).
        self.fixed_reply = fixed_reply
        self.api_keys = set(api_keys)
        self.models = set(models)
        self.leak_key = leak_key
        self.leak_encodings = leak_encodings
        self.echo_key_at = echo_key_at
        self.host, self.port = host, port
        self.record = record
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._mock = MockModel("fake")
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL (ends in /v1)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """Anthropic-style base URL (no /v1)."""
        return f"http://{self.host}:{self.port}"

    # -- lifecycle ----------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_get("/v1/models", self._list_models)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start_in_thread(self) -> FakeModelServer:
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=serve, name="fake-model-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = self._thread = None

    # -- handlers -----------------------------------------------------------------------------------

    async def _begin(self, request: web.Request, key: str | None) -> tuple[dict[str, Any] | None, Any]:
        """Count, delay, parse; returns (body or None, scripted action or None)."""
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        raw = await request.read()
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if self.record:
            self.requests.append({"path": request.path, "key": key, "body": body, "time": time.monotonic()})
        if self.latency:
            await asyncio.sleep(self.latency)
        action = self.script.pop(0) if self.script else None
        if action and action.get("delay"):
            await asyncio.sleep(float(action["delay"]))
        return body, action

    async def _list_models(self, request: web.Request) -> web.Response:
        data = [{"id": m, "object": "model"} for m in sorted(self.models)]
        return web.json_response({"object": "list", "data": data})

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        key = header[7:] if header.startswith("Bearer ") else None
        try:
            body, action = await self._begin(request, key)
            if self.api_keys and key not in self.api_keys:
                shown = key if key is not None else "(none)"
                if self.echo_key_at is not None:
                    filler = "request rejected; the request was " * 40
                    said = f"{filler[:self.echo_key_at]}{shown}{filler}"
                else:
                    said = f"Incorrect API key provided: {shown}."
                return _openai_error(401, said, "invalid_request_error", "invalid_api_key")
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return _openai_error(400, "We could not parse the JSON body of your request.",
                                     "invalid_request_error")
            model = str(body.get("model") or "")
            if self.models and model not in self.models:
                return _openai_error(404, f"The model `{model}` does not exist or you do not have access to it.",
                                     "invalid_request_error", "model_not_found")
            scripted = self._scripted(action, anthropic=False, request=request)
            if scripted is not None:
                return scripted
            message = dict(action["reply"]) if action and action.get("reply") else self._reply(body, key)
            completion = len(str(message.get("content") or "").split()) + 8 * len(message.get("tool_calls") or [])
            return web.json_response({
                "id": "chatcmpl-" + secrets.token_hex(6), "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": count_tokens(body["messages"]), "completion_tokens": completion,
                          "total_tokens": count_tokens(body["messages"]) + completion},
            })
        finally:
            self.in_flight -= 1

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        key = request.headers.get("x-api-key")
        try:
            body, action = await self._begin(request, key)
            if self.api_keys and key not in self.api_keys:
                return _anthropic_error(401, "invalid x-api-key", "authentication_error")
            if not request.headers.get("anthropic-version"):
                return _anthropic_error(400, "anthropic-version header is required", "invalid_request_error")
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body.get("max_tokens"):
                return _anthropic_error(400, "messages and max_tokens are required", "invalid_request_error")
            model = str(body.get("model") or "")
            if self.models and model not in self.models:
                return _anthropic_error(404, f"model: {model}", "not_found_error")
            scripted = self._scripted(action, anthropic=True, request=request)
            if scripted is not None:
                return scripted
            messages, tools = _anthropic_to_openai(body)
            if action and action.get("reply"):
                message = dict(action["reply"])
            else:
                message = self._reply({"messages": messages, "tools": tools}, key)
            content: list[dict[str, Any]] = []
            if message.get("content"):
                content.append({"type": "text", "text": message["content"]})
            for tc in message.get("tool_calls") or ():
                content.append({"type": "tool_use", "id": tc["id"], "name": tc["function"]["name"],
                                "input": json.loads(tc["function"]["arguments"] or "{}")})
            return web.json_response({
                "id": "msg_" + secrets.token_hex(6), "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": "tool_use" if message.get("tool_calls") else "end_turn",
                "usage": {"input_tokens": count_tokens(messages), "output_tokens": 5 + 8 * len(content)},
            })
        finally:
            self.in_flight -= 1

    def _scripted(self, action: Mapping[str, Any] | None, *, anthropic: bool,
                  request: web.Request) -> web.StreamResponse | None:
        if not action:
            return None
        if action.get("drop"):
            transport = request.transport
            if transport is not None:
                transport.close()
            return web.Response(status=500)
        if action.get("malformed"):
            return web.Response(status=200, text='{"choices": [', content_type="application/json")
        if "garbage" in action:
            return web.Response(status=200, text=str(action["garbage"]), content_type="text/html")
        if "json" in action:
            return web.json_response(action["json"])
        if action.get("broken_stream"):
            return web.Response(status=200, body=b'data: {"choices": [{"delta": {"content": "Hel\n\ndata: [DONE]\n\n',
                                headers={"Content-Type": "text/event-stream"})
        if action.get("status"):
            status = int(action["status"])
            message = str(action.get("message") or f"scripted error {status}")
            if anthropic:
                return _anthropic_error(status, message, "overloaded_error" if status >= 500 else "api_error",
                                        action.get("headers"))
            return _openai_error(status, message, "server_error" if status >= 500 else "invalid_request_error",
                                 headers=action.get("headers"))
        return None

    def _reply(self, body: Mapping[str, Any], key: str | None) -> dict[str, Any]:
        if self.fixed_reply is not None:
            return {"role": "assistant", "content": self.fixed_reply}
        message = self._mock._reply(body["messages"], body.get("tools") or ())
        if self.leak_key and key and not message.get("tool_calls"):
            leaked = f"your key is {key}"
            if self.leak_encodings:
                b64 = base64.b64encode
                leaked += (f", sent as Bearer {b64(f'Bearer {key}'.encode()).decode()}, basic "
                           f"{b64(f'user:{key}'.encode()).decode()}, query ?key={quote_plus(key)}")
            message["content"] = f"{message.get('content') or ''} ({leaked})"
        return message


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--api-key", action="append", default=[], help="accepted key (default: any)")
    parser.add_argument("--model", action="append", default=[], help="served model (default: any name)")
    parser.add_argument("--fixed-reply", default=None, help="answer every request with this text")
    args = parser.parse_args(argv)

    async def serve() -> None:
        server = FakeModelServer(latency=args.latency, api_keys=args.api_key, models=args.model,
                                 host=args.host, port=args.port, record=False, fixed_reply=args.fixed_reply)
        await server.start()
        print(server.base_url, flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
