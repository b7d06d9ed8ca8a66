"""Models for tests: a loopback OpenAI-compatible server and an in-process scripted model.

Both are driven by a *responder*: a function (plain or ``async``) that gets the chat request as a dict
(``model``, ``messages``, ``tools``, generation settings) and returns

* an assistant message dict (``{"content": "..."}`` or ``{"content": None, "tool_calls": [...]}``; ``role``
  defaults to ``assistant``) — build them with :func:`text` and :func:`tool_call`;
* or ``(status, body)``: an HTTP error answer (``body`` a JSON-ready value, or raw ``bytes`` for a malformed
  answer). The :class:`ScriptedModel` raises it as a :class:`~agentcompass.runtime.ModelError`.

Without a responder both behave like the built-in ``mock`` model.

(A little over 300 lines: the server and the in-process model share the responder protocol, which is easier to
read in one place than split across two modules.)
"""

from __future__ import annotations

import asyncio
import inspect
import json
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError, Usage

Message = dict[str, Any]
#: ``responder(request) -> message | (status, body)``, plain or ``async``.
Responder = Callable[[dict[str, Any]], Any]

#: The bearer token :class:`LoopbackOpenAI` accepts unless told otherwise.
DEFAULT_API_KEY = "agentcompass-test-key"


# -- building answers ----------------------------------------------------------------------------------


def text(content: str) -> Message:
    """An assistant message with text only."""
    return {"role": "assistant", "content": content}


def tool_call(name: str, call_id: str = "call_1", **arguments: Any) -> Message:
    """An assistant message calling one tool with ``arguments`` (JSON-encoded, as OpenAI sends them)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ],
    }


def custom_call(name: str, text_input: str, call_id: str = "call_1") -> Message:
    """An assistant message calling one free-form (``custom``) tool, as Codex's ``apply_patch``."""
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "custom", "custom": {"name": name, "input": text_input}}]}


def scripted(*steps: Message | tuple[int, Any], then: Message | tuple[int, Any] | None = None) -> Responder:
    """A responder answering with ``steps`` in order, then with ``then`` forever (default: a short text)."""
    queue = list(steps)
    after = then if then is not None else text("(the script is exhausted)")
    lock = threading.Lock()

    def responder(request: dict[str, Any]) -> Message | tuple[int, Any]:
        with lock:
            return queue.pop(0) if queue else after

    return responder


async def mock_responder(request: dict[str, Any]) -> Message:
    """The built-in ``mock`` model's answer to ``request``."""
    from agentcompass.builtin.mock_model import MockModel

    response = await MockModel(str(request.get("model") or "mock")).chat(
        request.get("messages") or [], tools=request.get("tools") or None
    )
    return dict(response.message)


async def _answer(responder: Responder, request: dict[str, Any]) -> Any:
    """Call a responder from async code: a plain function runs on a thread (it may block)."""
    if inspect.iscoroutinefunction(responder):
        return await responder(request)
    answer = await asyncio.to_thread(responder, request)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


def _answer_sync(responder: Responder, request: dict[str, Any]) -> Any:
    """Call a responder from a thread without an event loop."""
    answer = responder(request)
    if inspect.isawaitable(answer):
        awaitable: Awaitable[Any] = answer

        async def wait() -> Any:
            return await awaitable

        answer = asyncio.run(wait())
    return answer


def _message(answer: Mapping[str, Any]) -> Message:
    message = {"role": "assistant", "content": None, **answer}
    return message


def _error_message(body: Any) -> str:
    if isinstance(body, bytes):
        return body.decode("utf-8", "replace")
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and error.get("message"):
            return str(error["message"])
        if error:
            return str(error)
    return json.dumps(body, default=str)


def _tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "").split()) + 1 for m in messages)


# -- the in-process model ------------------------------------------------------------------------------


class ScriptedModel(ModelClient):
    """A :class:`~agentcompass.runtime.ModelClient` answering through a responder (default: the ``mock``
    policy). Pass it as ``model=`` to :func:`~agentcompass.testing.run_benchmark`: the run's gateway then
    serves it to code inside the environment like any provider. ``requests`` records every call."""

    def __init__(self, responder: Responder | None = None, *, model: str = "scripted") -> None:
        self.responder: Responder = responder or mock_responder
        self.model = model
        self.requests: list[dict[str, Any]] = []

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        request: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages], **params}
        if tools:
            request["tools"] = [dict(t) for t in tools]
        self.requests.append(request)
        answer = await _answer(self.responder, request)
        if isinstance(answer, tuple):
            status, body = answer
            if status == 200 and isinstance(body, Mapping) and body.get("choices"):
                answer = body["choices"][0]["message"]
            else:
                raise ModelError(_error_message(body) if status != 200 else "invalid chat completion",
                                 status=status if status != 200 else 502,
                                 retryable=status == 429 or status >= 500)
        message = _message(answer)
        completion = len(str(message.get("content") or "").split()) + 8 * len(message.get("tool_calls") or [])
        return ChatResponse(
            message=message,
            model=self.model,
            usage=Usage(prompt_tokens=_tokens(messages), completion_tokens=completion),
            finish_reason="tool_calls" if message.get("tool_calls") else "stop",
        )


# -- the loopback server -------------------------------------------------------------------------------


class LoopbackOpenAI:
    """An OpenAI-compatible server on ``127.0.0.1`` (``POST /v1/chat/completions``, ``GET /v1/models``),
    for code that talks HTTP itself — an upstream runner run as a subprocess, say::

        with LoopbackOpenAI(scripted(tool_call("create_task", title="x"), text("done"))) as server:
            subprocess.run([...], env={**os.environ, **server.env("my-model")})
        assert server.requests[0]["messages"][0]["role"] == "system"

    It runs on threads of its own, so it works from plain and from async tests (``with`` or ``async with``),
    and a responder may block (``time.sleep``) without stalling other requests. ``api_key=None`` accepts any
    key; a wrong key is a 401 ``invalid api key``. ``stream: true`` requests get server-sent events.

    Recorded: ``requests`` (the JSON bodies of POSTs, in order) and ``auth_headers`` (their
    ``Authorization`` headers).
    """

    def __init__(self, responder: Responder | None = None, *, api_key: str | None = DEFAULT_API_KEY,
                 models: Sequence[str] = ()) -> None:
        self.responder: Responder = responder or mock_responder
        self.api_key = api_key
        self.models = list(models)
        self.requests: list[Any] = []
        self.auth_headers: list[str | None] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- addresses -----------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the server is not started: use `with LoopbackOpenAI(...) as server:`")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def env(self, model: str = "scripted") -> dict[str, str]:
        """Variables pointing an OpenAI-style client here (the names the run's gateway sets in an exec)."""
        return {
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_BASE": self.base_url,
            "OPENAI_API_KEY": self.api_key or "any-key",
            "AGENTCOMPASS_MODEL": model,
        }

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> LoopbackOpenAI:
        if self._server is not None:
            return self
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> LoopbackOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> LoopbackOpenAI:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    # -- serving -------------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") != "/v1/models":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if not self._authorised():
                    return self._send(401, {"error": {"message": "invalid api key", "type": "auth_error"}})
                data = [{"id": m, "object": "model"} for m in server.models]
                self._send(200, {"object": "list", "data": data})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except (json.JSONDecodeError, UnicodeDecodeError):
                    body = None
                server.requests.append(body)
                server.auth_headers.append(self.headers.get("Authorization"))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if not self._authorised():
                    return self._send(401, {"error": {"message": "invalid api key", "type": "auth_error"}})
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    return self._send(400, {"error": {"message": "the body needs a 'messages' list"}})
                try:
                    answer = _answer_sync(server.responder, body)
                except Exception as exc:  # a responder bug is the test's 500, not a hung client
                    return self._send(500, {"error": {"message": f"responder failed: {exc!r}"}})
                if isinstance(answer, tuple):
                    return self._send(*answer)
                message = _message(answer)
                completion = len(str(message.get("content") or "").split()) + 8 * len(message.get("tool_calls") or [])
                usage = {"prompt_tokens": _tokens(body["messages"]), "completion_tokens": completion,
                         "total_tokens": _tokens(body["messages"]) + completion}
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                cid = "chatcmpl-" + secrets.token_hex(6)
                if body.get("stream"):
                    return self._stream(cid, str(body.get("model") or ""), message, finish, usage)
                self._send(200, {
                    "id": cid, "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model"),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                })

            def _authorised(self) -> bool:
                return server.api_key is None or self.headers.get("Authorization") == f"Bearer {server.api_key}"

            def _send(self, status: int, body: Any) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, cid: str, model: str, message: Message, finish: str, usage: Any) -> None:
                delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
                if message.get("tool_calls"):
                    delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(message["tool_calls"])]
                chunks = [
                    {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
                ]
                payload = b"".join(
                    f"data: {json.dumps({'id': cid, 'object': 'chat.completion.chunk', 'model': model, **c})}\n\n"
                    .encode() for c in chunks
                ) + b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler
