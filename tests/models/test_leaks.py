"""End to end against the loopback server: a key echoed by a provider where its error message is cut leaves no
piece of itself anywhere; nor do its encodings; a huge request leaves a bounded trajectory; an endpoint that
refuses connections stops the run at once, saying so."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import string
import tempfile
import time
from pathlib import Path

import pytest
from agentcompass.cli.main import cli as agentcompass_cli
from agentcompass.models.metering import RECORD_LIMIT
from agentcompass.redaction import Redactor
from agentcompass.runtime import RunRequest
from agentcompass.runtime.models import ModelError
from agentcompass_models.http import ERROR_SNIPPET
from agentcompass_models.openai import make_openai_compatible
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples
from tests.models.fake_server import FakeModelServer
from tests.models.models_support import API_KEY, MODEL, ProbeBenchmark, cli, plugin_host, read_jsonl, run
from tests.models.models_support import settings as client_settings

#: Keys with characters base64, percent-encoding and JSON change; always random enough to be told apart.
KEY_CHARS = string.ascii_letters + string.digits + "-_.~+/="


def keys(min_size: int = 17, alphabet: str = KEY_CHARS) -> st.SearchStrategy[str]:
    """Random keys, as real ones are. (Hypothesis's own text strategy likes words it finds in the code under
    test, such as "executors", which a run's files are full of.)"""
    return st.builds(lambda rnd, n: "sk-" + "".join(rnd.choice(alphabet) for _ in range(n)),
                     st.randoms(use_true_random=True), st.integers(min_size, 45))


def probe(server: FakeModelServer, **benchmark_args: str) -> RunRequest:
    return RunRequest(benchmark="model_probe", harness="none", model=f"openai-compatible/{MODEL}", benchmark_args=benchmark_args).with_options(model_base_url=server.base_url, model_api_key_env="TEST_MODEL_KEY")


def pieces(value: str, n: int = 8) -> set[str]:
    return {value[i:i + n] for i in range(len(value) - n + 1)}


def leaked(value: str, text: str) -> set[str]:
    """The 8-character pieces of ``value`` in ``text``, each with what surrounds it."""
    return {text[max(0, i - 40):i + 48] for p in pieces(value) if (i := text.find(p)) >= 0}


def files_text(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def invoke(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    result = CliRunner().invoke(agentcompass_cli, args, obj={"plugin_host": plugin_host()}, env=env,
                                catch_exceptions=False)
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None else "")


# -- 1. a key echoed where the provider's message is cut --------------------------------------------------


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(key=keys(), data=st.data())
def test_a_key_echoed_across_the_cut_off_is_masked_by_the_provider(key: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(ERROR_SNIPPET - len(key) + 1, ERROR_SNIPPET - 1), label="echo offset")
    server = FakeModelServer(api_keys={"sk-the-right-one-000"}, models={MODEL}, echo_key_at=at).start_in_thread()
    try:
        client = make_openai_compatible(MODEL, settings=client_settings(server, environ={"TEST_MODEL_KEY": key}))

        async def call() -> str:
            try:
                await client.chat([{"role": "user", "content": "hi"}])
            except ModelError as exc:
                return str(exc)
            finally:
                await client.aclose()
            raise AssertionError("the wrong key was accepted")

        message = asyncio.run(call())
    finally:
        server.stop_thread()
    assert "authentication failed (HTTP 401)" in message and message.endswith("...")
    assert not leaked(key, message), message


@settings(max_examples=examples(12), deadline=None, suppress_health_check=list(HealthCheck))
@given(good=keys(), wrong=keys(), via=st.sampled_from(["gateway", "client"]), data=st.data())
def test_no_piece_of_a_key_reaches_run_files_logs_output_or_environments(
        good: str, wrong: str, via: str, data: st.DataObject) -> None:
    if good == wrong:
        wrong += "-x"
    at = data.draw(st.integers(ERROR_SNIPPET - len(wrong) + 1, ERROR_SNIPPET - 1), label="echo offset")
    # Replies repeat the key and its encodings (base64 of "Bearer KEY" and "user:KEY", URL-encoded); a wrong key
    # comes back in a long 401 message, at the offset where the provider's quote of it is cut.
    server = FakeModelServer(api_keys={good}, models={MODEL}, leak_key=True, leak_encodings=True,
                             echo_key_at=at).start_in_thread()
    work = Path(tempfile.mkdtemp(prefix="ac-leaks-"))
    ProbeBenchmark.environment_dumps.clear()
    ProbeBenchmark.gateway_answers.clear()
    try:
        common = ["run", "model_probe", "none", f"openai/{MODEL}", "-b", "n_tasks=3", "-b", f"via={via}",
                  "-b", "dump_env=1", "-c", "2", "--json", "--max-retries", "0"]
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": good}
        code, output = invoke([*common, "-o", str(work / "ok")], env)
        assert code == 0, output
        code, bad_output = invoke([*common, "-o", str(work / "bad")], {**env, "OPENAI_API_KEY": wrong})
        assert code == 1, bad_output
        summary = json.loads((work / "bad" / "summary.json").read_text())
        assert "authentication failed" in summary["stopped_reason"]
        assert (work / "bad" / "logs.jsonl").exists() and read_jsonl(work / "bad" / "trajectories.jsonl")

        seen = {"run files": files_text(work), "output": output + bad_output,
                "environments": "\n".join(ProbeBenchmark.environment_dumps + ProbeBenchmark.gateway_answers)}
        for key in (good, wrong):
            for where, text in seen.items():
                assert not leaked(key, text), (where, key, leaked(key, text))
        assert "***" in (work / "ok" / "trajectories.jsonl").read_text()
    finally:
        server.stop_thread()
        shutil.rmtree(work, ignore_errors=True)


# -- 3. a huge request through the gateway ----------------------------------------------------------------


def test_a_huge_request_through_the_gateway_leaves_a_bounded_record(
        server: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_MODEL_KEY", API_KEY)
    # 20 MB, with the key back to back where the record is cut: the cut falls in one of them (or between two).
    tail = "a" * (RECORD_LIMIT - 20_000) + API_KEY * (30_000 // len(API_KEY)) + "b" * 20_000_000
    monkeypatch.setattr(ProbeBenchmark, "first_message_tail", tail)
    out = tmp_path / "run"
    outcome = run(probe(server, via="gateway", n_tasks="1", calls="1"), out)
    assert outcome.exit_code == 0, read_jsonl(out / "results.jsonl")
    assert len(server.requests[-1]["body"]["messages"][0]["content"]) > 20_000_000  # the model got it all
    size = (out / "trajectories.jsonl").stat().st_size
    assert size <= RECORD_LIMIT + 1024, size
    [call] = read_jsonl(out / "trajectories.jsonl")
    assert call["via"] == "gateway"
    assert call["truncated"]["original_bytes"] > 20_000_000 and call["truncated"]["limit_bytes"] == RECORD_LIMIT
    content = call["messages"][0]["content"]
    assert content.endswith(" more bytes not recorded]")
    redactor = Redactor()
    redactor.add(API_KEY)
    # Masked, then cut: what is kept is the beginning of the masked message, with no piece of a key at its end.
    assert redactor.text(f"hello from t000{tail}").startswith(content[:content.rindex("[... ")])
    assert not leaked(API_KEY, (out / "trajectories.jsonl").read_text())


# -- 4. an endpoint that refuses connections ---------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once the socket is closed


def test_an_unreachable_endpoint_stops_the_run_at_once_and_says_why(tmp_path: Path) -> None:
    port = closed_port()
    url = f"http://127.0.0.1:{port}/v1"
    out = tmp_path / "run"
    started = time.monotonic()
    proc = cli(["run", "example_interactive", "none", "openai-compatible/x", "--model-base-url", url,
                "-o", str(out)], env={})
    elapsed = time.monotonic() - started
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert elapsed < 10, elapsed  # was 32 s: 11 tasks, each retried with backoff, twice over
    cause = f"cannot connect to {url}: connection refused"
    summary = json.loads((out / "summary.json").read_text())
    assert cause in summary["stopped_reason"]
    assert cause in proc.stdout + proc.stderr
    # No HTTP 503 of the gateway's is reported (a seed, port or run id may hold the digits inside a longer word).
    assert not re.search(r"(?<![\w.])503(?![\w.])", proc.stdout + proc.stderr)
    # The tasks in flight (-c 8) stay unfinished (attempts, resumable), never final errors.
    assert read_jsonl(out / "results.jsonl") == []
    results = read_jsonl(out / "attempts.jsonl")
    assert results and all(cause in r["error"] for r in results)
    assert all(r["error"].count("attempts") <= 1 for r in results)
    assert summary["n_unfinished"] == 11
    calls = read_jsonl(out / "trajectories.jsonl")
    assert calls and all(c["error"] for c in calls)


async def test_the_gateway_tells_clients_not_to_retry_what_the_provider_retried(server: FakeModelServer) -> None:
    import aiohttp
    from agentcompass.models.gateway import ModelGateway
    from agentcompass.models.metering import TaskMeter

    agent = make_openai_compatible(MODEL, settings=client_settings(server, max_retries=1))
    gateway = ModelGateway({"agent": f"openai-compatible/{MODEL}"})
    await gateway.start()
    meter = TaskMeter("t", 1)
    server.script += [{"status": 503, "message": f"busy, said the server to {API_KEY}"}] * 2
    try:
        token, _ = gateway.grant({"agent": agent}, meter, gateway.base_url)
        async with aiohttp.ClientSession() as h, h.post(
                f"{gateway.base_url}/chat/completions", headers={"Authorization": f"Bearer {token}"},
                json={"model": "agent", "messages": [{"role": "user", "content": "x"}]}) as r:
            status, retry, text = r.status, r.headers.get("x-should-retry"), await r.text()
    finally:
        await gateway.stop()
        await agent.aclose()
    assert status == 503 and retry == "false"
    message = json.loads(text)["error"]["message"]
    assert message.count("(after 2 attempts)") == 1 and API_KEY not in text and "***" in message
    [call] = meter.calls
    assert call.attempts == 2 and call.error and call.error.endswith("(after 2 attempts)")
