"""A model server answering garbage — an HTML page, JSON of the wrong shape, a broken event stream — on a real
loopback server: the provider's failure (retried, then an outage: the task stays unfinished and resumable),
reported on one line naming the user's server, never the gateway's own address; through the gateway, what
the official ``openai`` SDK raises says the same."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import openai
import pytest
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.runtime import RunRequest
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.models import ModelError
from agentcompass_models.openai import make_openai_compatible

from tests.models.fake_server import FakeModelServer
from tests.models.models_support import API_KEY, MODEL, cli, probe, read_jsonl, run

HTML = "<html><head><title>502 Bad Gateway</title></head><body><center>nginx</center>" + "<p>x</p>" * 200
#: Script actions of each kind of garbage, and what the error must say of it.
GARBAGE: dict[str, tuple[dict[str, Any], str]] = {
    "html": ({"garbage": HTML}, "answered HTTP 200 with a body that is not JSON: '<html><head><title>502 Bad"),
    "wrong-shape": ({"json": {"detail": "upstream said hello"}},
                    "answered HTTP 200 with JSON that is not a chat completion (no choices[0].message)"),
    "not-an-object": ({"json": ["a", "list"]}, "answered HTTP 200 with JSON that is not an object"),
}
LOOPBACK_PORT = re.compile(r"127\.0\.0\.1:(\d+)")


def _one_line_naming(error: str, server: FakeModelServer, said: str) -> None:
    assert "\n" not in error, error
    assert said in error, error
    assert server.base_url in error, error  # the user's server ...
    assert set(LOOPBACK_PORT.findall(error)) == {str(server.port)}, error  # ... and no other (the gateway's)
    assert len(error) < 600, error  # the garbage is quoted cut short, not whole


@pytest.mark.parametrize("via", ["client", "gateway"])
@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_is_an_outage_naming_the_server_and_resume_completes(
        server: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, via: str) -> None:
    monkeypatch.setenv("TEST_MODEL_KEY", API_KEY)
    action, said = GARBAGE[kind]
    server.script += [action] * 40
    out = tmp_path / "run"
    outcome = run(probe(server, max_retries=1, concurrency=1, benchmark_args={"n_tasks": "3", "via": via}), out)
    # Retried under --max-retries (two requests), then an outage: the run stops, nothing is a final error.
    assert len(server.requests) == 2, server.requests
    assert outcome.exit_code == 1 and read_jsonl(out / "results.jsonl") == []
    assert outcome.summary.n_unfinished == 3 and "RUN_ERROR" not in outcome.summary.status_counts
    assert "model provider outage" in (outcome.summary.stopped_reason or "")
    (attempt,) = read_jsonl(out / "attempts.jsonl")
    assert attempt["error"].startswith("model provider outage: openai-compatible model 'tiny' at "), attempt
    _one_line_naming(attempt["error"], server, said)
    (call,) = read_jsonl(out / "trajectories.jsonl")
    assert call["attempts"] == 2 and "(after 2 attempts)" in call["error"]
    _one_line_naming(call["error"], server, said)
    # The server is fixed: --resume finishes every task.
    server.script.clear()
    again = run(RunRequest(benchmark="", harness="", model=""), out, resume=True)
    assert again.exit_code == 0 and again.summary.stopped_reason is None
    assert sorted(r["status"] for r in read_jsonl(out / "results.jsonl")) == ["COMPLETED"] * 3


async def test_garbage_is_retried_in_process_and_a_good_answer_wins(server: FakeModelServer) -> None:
    server.script += [GARBAGE["html"][0], GARBAGE["wrong-shape"][0]]
    client = make_openai_compatible(MODEL, settings=ProviderSettings(
        base_url=server.base_url, max_retries=2, environ={"K": API_KEY}, api_key_env="K"))
    try:
        reply = await client.chat([{"role": "user", "content": "hello"}])
    finally:
        await client.aclose()
    assert reply.metadata["attempts"] == 3 and reply.content


async def test_a_broken_stream_in_process_is_retried_then_an_outage() -> None:
    server = FakeModelServer(models={MODEL})  # no key: the credentials are in the base URL
    await server.start()
    server.script += [{"broken_stream": True}] * 3
    client = make_openai_compatible(MODEL, settings=ProviderSettings(
        base_url=f"http://user:hunter2-pass-1234@127.0.0.1:{server.port}/v1", max_retries=1))
    try:
        with pytest.raises(ModelError) as info:
            async for _ in client.stream([{"role": "user", "content": "hello"}]):
                pass
    finally:
        await client.aclose()
        await server.stop()
    error = str(info.value)
    assert info.value.retryable and len(server.requests) == 2
    assert "hunter2" not in error and f"http://***@127.0.0.1:{server.port}/v1" in error, error
    assert "answered HTTP 200 with an event stream holding an event that is not JSON" in error, error
    assert "(after 2 attempts)" in error


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", ["html", "wrong-shape", "broken-stream"])
async def test_the_openai_sdk_through_the_gateway_gets_one_line_naming_the_provider(
        server: FakeModelServer, kind: str, stream: bool) -> None:
    action, said = GARBAGE[kind] if kind in GARBAGE else (
        {"broken_stream": True}, "answered HTTP 200 with an event stream holding an event that is not JSON")
    server.script += [action] * 4
    provider = make_openai_compatible(MODEL, settings=ProviderSettings(
        base_url=server.base_url, max_retries=1, environ={"K": API_KEY}, api_key_env="K"))
    gateway = ModelGateway({"agent": f"openai-compatible/{MODEL}"})
    await gateway.start()
    meter = TaskMeter("t", 1)
    try:
        token, _ = gateway.grant({"agent": provider}, meter, gateway.base_url)
        sdk = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
        with pytest.raises(openai.APIError) as info:
            answer = await sdk.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hello"}], stream=stream)
            if stream:
                async for _ in answer:  # type: ignore[union-attr]
                    pass
        await sdk.close()
    finally:
        await gateway.stop()
        await provider.aclose()
    error = str(info.value)  # what an agent prints
    assert isinstance(info.value, openai.APIStatusError) and info.value.status_code == 502
    assert error.startswith(f"Error code: 502 - model 'agent' failed: openai-compatible model '{MODEL}' at "), error
    _one_line_naming(error, server, said)
    # What the run records says the same, and is an outage (the attempt is resumable, not a final error).
    (call,) = meter.calls
    assert call.error and said in call.error and "\n" not in call.error
    assert meter.outage_error == call.error
    why, worth_retrying = meter.unfinished()
    assert worth_retrying and why == f"model provider outage: {call.error}"


def test_an_installed_agent_meeting_garbage_leaves_the_task_resumable_naming_the_server(
        server: FakeModelServer, tmp_path: Path) -> None:
    # example_interactive's own runner (a subprocess, a client we did not write) calls through the gateway.
    action, said = GARBAGE["html"]
    server.script += [action] * 10
    out = tmp_path / "run"
    args = ["--model-base-url", server.base_url, "--model-api-key-env", "TEST_MODEL_KEY", "--max-retries", "1"]
    proc = cli(["run", "example_interactive", "none", f"openai-compatible/{MODEL}", "-t", "create_basic", *args,
                "-o", str(out)], env={"TEST_MODEL_KEY": API_KEY})
    assert proc.returncode == 1, proc.stderr
    assert read_jsonl(out / "results.jsonl") == []  # not a final RUN_ERROR
    (attempt,) = read_jsonl(out / "attempts.jsonl")
    _one_line_naming(attempt["error"], server, said)
    server.script.clear()
    again = cli(["run", "--resume", str(out)], env={"TEST_MODEL_KEY": API_KEY})
    assert again.returncode == 0, again.stderr
    assert [r["status"] for r in read_jsonl(out / "results.jsonl")] == ["COMPLETED"]
