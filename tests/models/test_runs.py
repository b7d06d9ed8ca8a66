"""Whole runs against a loopback model server: roles, gateway routing, metering, budgets, the auth stop,
and ``agentcompass run example_interactive none openai/NAME`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest
from agentcompass.errors import UsageError
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.runtime import RunRequest
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass_models.openai import make_openai_compatible

from tests.models.fake_server import FakeModelServer
from tests.models.models_support import API_KEY, EXPECTED_SCORES, MODEL, all_text, cli, probe, read_jsonl, run

# -- end to end through the CLI ------------------------------------------------------------------------


def test_example_interactive_end_to_end_openai_via_gateway(server: FakeModelServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = cli(["run", "example_interactive", "none", f"openai/{MODEL}", "--env", "local", "-o", str(out),
                "--json"], env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": API_KEY})
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status_counts"] == {"COMPLETED": 11}
    results = {r["task_id"]: r["metrics"]["score"] for r in read_jsonl(out / "results.jsonl")}
    assert results == EXPECTED_SCORES
    calls = read_jsonl(out / "trajectories.jsonl")
    assert calls and all(c["via"] == "gateway" and c["role"] == "agent" for c in calls)
    assert any(c["response"].get("tool_calls") for c in calls)
    assert all(c["prompt_tokens"] > 0 and c["latency_s"] > 0 for c in calls)
    assert summary["usage"]["agent"]["calls"] == len(calls)
    # The real key reached the server (host side) on every call, and is nowhere in the run directory.
    assert server.requests and all(r["key"] == API_KEY for r in server.requests)
    assert API_KEY not in all_text(out) and API_KEY not in proc.stdout + proc.stderr
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["request"]["model"] == f"openai/{MODEL}"


def test_bad_key_stops_the_run_early_and_resume_finishes(server: FakeModelServer, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    wrong = "sk-wrong-0123456789"
    monkeypatch.setenv("TEST_MODEL_KEY", wrong)
    outcome = run(probe(server, benchmark_args={"n_tasks": "30"}), out)
    summary = outcome.summary
    assert outcome.exit_code == 1
    assert "authentication failed (HTTP 401)" in summary.stopped_reason
    assert "$TEST_MODEL_KEY" in summary.stopped_reason
    # The tasks in flight when the key was rejected stay unfinished (attempts), never final errors.
    assert summary.n_finished == 0 and read_jsonl(out / "results.jsonl") == [], summary
    attempts = read_jsonl(out / "attempts.jsonl")
    assert 1 <= len(attempts) <= 4 and all("authentication failed" in a["error"] for a in attempts)
    assert summary.n_unfinished == 30
    assert len(server.requests) <= 4
    assert wrong not in all_text(out)
    # Fix the key and resume: every task ends with exactly one final record.
    monkeypatch.setenv("TEST_MODEL_KEY", API_KEY)
    again = run(RunRequest(benchmark="", harness="", model="").with_options(concurrency=4), out, resume=True)
    # Nothing was lost to the rejected key: every task completes, as if the key had been right all along.
    assert again.summary.stopped_reason is None and again.exit_code == 0
    final: dict[str, list[str]] = {}
    for r in read_jsonl(out / "results.jsonl"):
        final.setdefault(r["task_id"], []).append(r["status"])
    assert len(final) == 30 and all(len(v) == 1 for v in final.values())
    assert sum(v == ["COMPLETED"] for v in final.values()) == 30


def test_missing_role_is_a_usage_error_before_the_run(server: FakeModelServer, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--judge-model"):
        run(probe(server, benchmark_args={"roles": "agent,judge"}), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_missing_key_is_a_usage_error_before_the_run(tmp_path: Path) -> None:
    proc = cli(["run", "example_interactive", "none", "openai/gpt-4o-mini", "-o", str(tmp_path / "r")], env={})
    assert proc.returncode == 2 and "OPENAI_API_KEY" in proc.stderr
    assert not (tmp_path / "r").exists()
    proc = cli(["run", "example_interactive", "none", "openai-compatible/Qwen3-8B", "-o", str(tmp_path / "r")],
               env={})
    assert proc.returncode == 2 and "--model-base-url" in proc.stderr


# -- roles, routing, metering ----------------------------------------------------------------------------


def test_roles_metered_per_role_with_cost(server: FakeModelServer, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_MODEL_KEY", API_KEY)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({MODEL: {"input": 1.0, "output": 2.0}}))
    req = probe(server, benchmark_args={"roles": "agent,user,judge", "n_tasks": "3", "calls": "2"},
                role_models={"user": "mock", "judge": f"openai-compatible/{MODEL}"}, prices=str(prices))
    outcome = run(req, tmp_path / "run")
    assert outcome.exit_code == 0
    usage = outcome.summary.usage
    assert usage["agent"].calls == 6 and usage["user"].calls == 3 and usage["judge"].calls == 3
    expected = (usage["agent"].prompt_tokens * 1.0 + usage["agent"].completion_tokens * 2.0) / 1e6
    assert usage["agent"].cost_usd == pytest.approx(expected)
    assert usage["user"].cost_usd == 0  # the offline mock costs nothing
    calls = read_jsonl(tmp_path / "run" / "trajectories.jsonl")
    agent = [c for c in calls if c["role"] == "agent"]
    assert all(c["cost_usd"] > 0 and c["attempts"] == 1 and c["messages"] for c in agent)
    assert {c["role"] for c in calls} == {"agent", "user", "judge"}


def test_gateway_calls_are_metered(server: FakeModelServer, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_MODEL_KEY", API_KEY)
    outcome = run(probe(server, benchmark_args={"via": "gateway", "n_tasks": "3", "calls": "3"}), tmp_path / "r")
    assert outcome.exit_code == 0, read_jsonl(tmp_path / "r" / "results.jsonl")
    calls = read_jsonl(tmp_path / "r" / "trajectories.jsonl")
    assert len(calls) == 9 and all(c["via"] == "gateway" for c in calls)


async def test_gateway_routes_by_model_name_to_the_role(server: FakeModelServer) -> None:
    agent = make_openai_compatible(MODEL, settings=ProviderSettings(base_url=server.base_url,
                                                                    environ={"K": API_KEY}, api_key_env="K"))
    judge = make_openai_compatible("judgey", settings=ProviderSettings(base_url=server.base_url,
                                                                       environ={"K": API_KEY}, api_key_env="K"))
    server.models.add("judgey")
    gateway = ModelGateway({"agent": f"openai-compatible/{MODEL}", "judge": "openai-compatible/judgey"})
    await gateway.start()
    meter = TaskMeter("t", 1)
    try:
        token, endpoints = gateway.grant({"agent": agent, "judge": judge}, meter, gateway.base_url)
        assert endpoints["judge"].model == "openai-compatible/judgey" and endpoints["agent"].api_key == token
        async with aiohttp.ClientSession() as h:
            async def ask(model: str, key: str = token) -> int:
                async with h.post(f"{gateway.base_url}/chat/completions", headers={"Authorization": f"Bearer {key}"},
                                  json={"model": model, "messages": [{"role": "user", "content": "x"}]}) as r:
                    assert r.status != 200 or (await r.json())["choices"]
                    return r.status

            for model, role in [("judge", "judge"), ("openai-compatible/judgey", "judge"), ("judgey", "judge"),
                                ("agent", "agent"), (MODEL, "agent")]:
                assert await ask(model) == 200, model
                assert meter.calls[-1].role == role
            assert await ask("gpt-5") == 200 and meter.calls[-1].role == "agent"  # unknown names: the agent
            assert await ask("agent", "sk-not-a-token") == 401
            gateway.revoke(token)
            assert await ask("agent") == 401  # tokens end with their attempt
    finally:
        await gateway.stop()
        await agent.aclose()
        await judge.aclose()
    assert [r["body"]["model"] for r in server.requests] == ["judgey"] * 3 + [MODEL] * 3
    assert all(r["key"] == API_KEY for r in server.requests)


# -- budgets -----------------------------------------------------------------------------------------------


def test_max_tokens_per_task_in_process(server: FakeModelServer, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_MODEL_KEY", API_KEY)
    outcome = run(probe(server, max_tokens_per_task=5, benchmark_args={"n_tasks": "3", "calls": "4"}),
                  tmp_path / "r")
    assert outcome.summary.status_counts == {"LIMIT_REACHED": 3}
    assert outcome.exit_code == 1 and outcome.summary.stopped_reason is None
    for r in read_jsonl(tmp_path / "r" / "results.jsonl"):
        assert r["error"].startswith("limit reached: max_tokens_per_task=5 (used ")
        assert r["error_phase"] == "run" and r["metrics"] == {}
    calls = read_jsonl(tmp_path / "r" / "trajectories.jsonl")
    assert len(calls) == 6  # one answered call, one refused, per task
    assert sum(1 for c in calls if c["error"]) == 3


def test_max_tokens_per_task_through_the_gateway(server: FakeModelServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = cli(["run", "example_interactive", "none", f"openai/{MODEL}", "-o", str(out), "--json",
                "--max-tokens-per-task", "400", "-t", "multi_create_and_update", "-t", "create_basic"],
               env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": API_KEY})
    assert proc.returncode == 1, proc.stderr
    results = {r["task_id"]: r for r in read_jsonl(out / "results.jsonl")}
    limited = [r for r in results.values() if r["status"] == "LIMIT_REACHED"]
    assert limited, results
    assert all(r["error"].startswith("limit reached: max_tokens_per_task=400") for r in limited)


def test_max_cost_stops_scheduling_and_resume_continues(server: FakeModelServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_MODEL_KEY", API_KEY)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({f"openai-compatible/{MODEL}": {"input": 1000.0, "output": 1000.0}}))
    out = tmp_path / "run"
    # Each call costs ~0.005-0.03 USD at these prices; 0.05 is spent after a few tasks.
    outcome = run(probe(server, prices=str(prices), max_cost=0.05, concurrency=1,
                        benchmark_args={"n_tasks": "20", "calls": "2"}), out)
    summary = outcome.summary
    assert summary.stopped_reason.startswith("limit reached: max_cost=0.05 USD")
    assert outcome.exit_code == 1
    assert 1 <= summary.n_finished < 20
    assert summary.n_unfinished == 20 - summary.n_finished
    assert summary.usage["agent"].cost_usd >= 0.05 or summary.status_counts.get("LIMIT_REACHED")
    again = run(RunRequest(benchmark="", harness="", model="").with_options(max_cost=100.0, concurrency=4), out, resume=True)
    assert again.summary.stopped_reason is None and again.summary.n_finished == 20


def test_max_cost_needs_a_price(server: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_MODEL_KEY", API_KEY)
    with pytest.raises(UsageError, match="--max-cost needs a price"):
        run(probe(server, max_cost=1.0), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_an_upstream_error_the_gateway_already_retried_is_not_retried_again_in_the_environment(
        server: FakeModelServer, tmp_path: Path) -> None:
    # The provider retries (--max-retries 1: two requests), then the gateway answers with x-should-retry: false;
    # example_interactive's runner must not multiply the requests, nor the "after N attempts" text.
    server.script += [{"status": 503, "message": "overloaded"}] * 20
    out = tmp_path / "run"
    proc = cli(["run", "example_interactive", "none", f"openai-compatible/{MODEL}", "-t", "create_basic",
                "--model-base-url", server.base_url, "--model-api-key-env", "TEST_MODEL_KEY", "--max-retries", "1",
                "-o", str(out)], env={"TEST_MODEL_KEY": API_KEY})
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert read_jsonl(out / "results.jsonl") == []  # a provider outage: unfinished, recorded as an attempt
    (result,) = read_jsonl(out / "attempts.jsonl")
    assert result["status"] == "RUN_ERROR" and "overloaded" in result["error"], result["error"]
    assert len(server.requests) == 2, [r["time"] for r in server.requests]
    assert result["error"].count("attempts") <= 1, result["error"]
