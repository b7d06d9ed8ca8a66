"""The gateway's cheap paths (issue 37) read and mask exactly what the slower ones did: the server-sent-event
parser decoding whole buffers, the redactor's one-pass probe over relayed bytes, the passthrough relay past the
first piece of the answer (whole events as they come, however the provider's bytes are cut), and the faults
middleware installed only on a run with ``--faults``."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from agentcompass.models.faults import serving_middleware
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.protocols.base import Decoder
from agentcompass.protocols.sse import SSEParser
from agentcompass.redaction import MASK, Redactor
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass_models.openai import make_openai
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples

SETTINGS = settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
KEY = "sk-relay-secret-0123456789abcdef"


class LineByLineParser:
    """The parser as it was before issue 37 (each line decoded on its own): the reference."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        lines = (self._buffer + chunk).split(b"\n")
        self._buffer = lines.pop()
        out: list[tuple[str, str]] = []
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if not line:
                if self._data or self._event:
                    out.append((self._event, "\n".join(self._data)))
                self._event, self._data = "", []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    self._event = value
                elif name == "data":
                    self._data.append(value)
        return out


#: Bytes that make event streams interesting: field names, separators, line ends, multi-byte and broken UTF-8.
pieces = st.lists(st.sampled_from([b"data", b"event", b"id", b":", b": ", b" ", b"\n", b"\r", b"\r\n", b"\n\n",
                                   b"x", b"{\"a\":1}", "é中😀".encode(), b"\xe2\x82", b"\xff", b"\x98", b"[DONE]"]),
                  max_size=40)


@SETTINGS
@given(stream=pieces, cuts=st.lists(st.integers(0, 400), max_size=10))
def test_the_parser_reads_what_line_by_line_decoding_read(stream: list[bytes], cuts: list[int]) -> None:
    raw = b"".join(stream)
    points = sorted({0, len(raw), *(c for c in cuts if c <= len(raw))})
    fast, slow = SSEParser(), LineByLineParser()
    for a, b in itertools.pairwise(points):
        assert fast.feed(raw[a:b]) == slow.feed(raw[a:b])
    assert fast.close() == SSEParser.close(slow)  # type: ignore[arg-type]


def payload_as_loaded(data: str) -> Any:
    """An event's JSON object as read before issue 37 (``json.loads`` of every event): the reference."""
    if not data or data.strip() == "[DONE]":
        return None
    value = json.loads(data)
    return value if isinstance(value, dict) else None


json_texts = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                       max_size=3),
                          max_leaves=6).map(lambda v: json.dumps(v, ensure_ascii=False))


@SETTINGS
@given(parts=st.lists(json_texts | st.sampled_from(["{", "}", " ", "\n", "[DONE]", ",", "x", "\ufeff", "NaN"]),
                      max_size=4))
def test_an_events_payload_is_what_json_loads_read(parts: list[str]) -> None:
    data = "".join(parts)
    try:
        expected: Any = payload_as_loaded(data)
    except json.JSONDecodeError as exc:
        expected = ("error", str(exc))
    try:
        got: Any = Decoder.payload(data)
    except json.JSONDecodeError as exc:
        got = ("error", str(exc))
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)


def masked_as_text(redactor: Redactor, data: bytes) -> bytes:
    """What the relay sent before issue 37: the buffer decoded, masked as text, encoded again."""
    text = data.decode("utf-8", errors="replace")
    masked = redactor.text(text)
    return data if masked is text else masked.encode()


@SETTINGS
@given(secret=st.text(st.characters(codec="utf-8", exclude_characters="\ufffd"), min_size=6, max_size=24),
       data=st.data())
def test_masking_bytes_masks_what_masking_text_masked(secret: str, data: st.DataObject) -> None:
    redactor = Redactor()
    redactor.add(secret, KEY)
    forms = [secret, KEY, json.dumps(secret)[1:-1], secret[:8], secret[-8:], KEY[3:15]]
    parts = data.draw(st.lists(st.sampled_from(forms) | st.binary(max_size=8).map(lambda b: b.decode(
        "utf-8", errors="replace")) | st.sampled_from(["data: ", "\n\n", "é", "\\"]), max_size=8))
    raw = "".join(parts).encode() + data.draw(st.sampled_from([b"", b"\xff", b"\xe2\x82"]))
    assert redactor.mask_bytes(raw) == masked_as_text(redactor, raw)
    if KEY in raw.decode("utf-8", errors="replace"):
        assert KEY.encode() not in redactor.mask_bytes(raw)


def test_masking_bytes_hands_back_the_same_buffer_when_nothing_is_masked() -> None:
    redactor = Redactor()
    redactor.add(KEY)
    clean = b'data: {"choices":[{"delta":{"content":"hello"}}]}\n\n'
    assert redactor.mask_bytes(clean) is clean
    assert redactor.mask_bytes(clean + KEY.encode()) == clean + MASK.encode()
    assert Redactor().mask_bytes(clean) is clean


# -- the passthrough relay, over real HTTP ------------------------------------------------------------------


def chat_events(words: list[str]) -> bytes:
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    chunks += [{"choices": [{"index": 0, "delta": {"content": w}}]} for w in words]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 3, "completion_tokens": len(words), "total_tokens": 3 + len(words)}})
    return b"".join(b"data: " + json.dumps({"id": "c", "model": "gpt-up", **c}).encode() + b"\n\n"
                    for c in chunks) + b"data: [DONE]\n\n"


async def cut_upstream(raw: bytes, size: int) -> tuple[web.AppRunner, str]:
    """A chat-completions provider streaming ``raw`` in pieces of ``size`` bytes (cut anywhere, mid-event)."""

    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(0, len(raw), size):
            await response.write(raw[i:i + size])
            await asyncio.sleep(0.002)  # its own TCP segment
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/v1"


@pytest.fixture
async def gateway() -> AsyncIterator[ModelGateway]:
    gw = ModelGateway({"agent": "openai/gpt-up"})
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop()


@pytest.mark.parametrize("size", [1, 7, 50, 100_000])
async def test_a_relayed_stream_cut_anywhere_arrives_whole_and_masked(gateway: ModelGateway, size: int) -> None:
    """The provider echoes its key in the middle of the answer (after the first piece, where the relay no longer
    reads the events): the agent gets every byte the provider sent, in whole events, the key masked; the call's
    record holds the whole answer and its usage."""
    words = ["Hello", " there", f" {KEY} ", "and", " more", " words"]
    raw = chat_events(words)
    upstream, base_url = await cut_upstream(raw, size)
    client = make_openai("gpt-up", settings=ProviderSettings(base_url=base_url, max_retries=0,
                                                             environ={"OPENAI_API_KEY": KEY}))
    meter = TaskMeter("t", 1)
    token, _ = gateway.grant({"agent": client}, meter, gateway.base_url)
    received: list[bytes] = []
    try:
        async with aiohttp.ClientSession() as http, http.post(
                gateway.base_url + "/chat/completions", headers={"Authorization": f"Bearer {token}"},
                json={"model": "gpt-up", "stream": True, "messages": [{"role": "user", "content": "hi"}]}) as r:
            assert r.status == 200
            async for chunk in r.content.iter_any():
                received.append(chunk)
    finally:
        await client.aclose()
        await upstream.cleanup()
    body = b"".join(received)
    assert KEY.encode() not in body
    assert body == raw.replace(KEY.encode(), MASK.encode())
    events = SSEParser().feed(body)
    assert [e for e in events if e[1] != "[DONE]"] and all(json.loads(d) for _, d in events if d != "[DONE]")
    (call,) = meter.calls
    # (the record holds the answer as the provider gave it: the run's writers mask what they write)
    assert call.response is not None and call.response["content"] == "".join(words)
    assert (call.prompt_tokens, call.completion_tokens) == (3, len(words))
    assert call.ttft_s is not None and call.passthrough


# -- the faults middleware ----------------------------------------------------------------------------------


def middlewares(gateway: ModelGateway) -> list[Any]:
    runner = gateway._runner
    assert runner is not None
    return list(runner.app.middlewares)


async def test_the_faults_middleware_is_installed_only_with_faults() -> None:
    """Without ``--faults`` no request runs through :func:`serving_middleware` (it costs every request)."""
    plain, faulted = ModelGateway({"agent": "m"}), ModelGateway({"agent": "m"}, faults=True)
    for gateway in (plain, faulted):
        await gateway.start()
    try:
        assert serving_middleware not in middlewares(plain)
        assert serving_middleware in middlewares(faulted)
    finally:
        for gateway in (plain, faulted):
            await gateway.stop()


@pytest.mark.parametrize("faults", [None, "none"])
async def test_a_run_installs_the_faults_middleware_only_with_faults(
        host: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, faults: str | None) -> None:
    """The runner tells its gateway whether ``--faults`` is set (a profile, even one injecting nothing)."""
    from agentcompass import runner as runner_module
    from agentcompass.runner import Runner
    from agentcompass.runtime import RunRequest

    seen: list[list[Any]] = []

    class Watched(ModelGateway):
        async def start(self) -> None:
            await super().start()
            seen.append(middlewares(self))

    monkeypatch.setattr(runner_module, "ModelGateway", Watched)
    req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"n": "1"})
    if faults is not None:
        req = req.with_options(faults=faults)
    await Runner(host, req, run_dir=tmp_path / "r").run()
    assert seen == [[serving_middleware] if faults else []]
