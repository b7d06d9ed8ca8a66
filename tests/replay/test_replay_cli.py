"""``run --replay``: a react run of example_coding recorded against a scripted loopback model, replayed through
the real CLI with no provider reachable — identical results and trajectories, ``results compare`` shows no
difference; a changed system prompt is a miss reported with its diff; ``--replay-miss live`` marks live calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentcompass.testing import LoopbackOpenAI

from tests.harnesses.support import solver
from tests.helpers.replay_runs import (
    agentcompass,
    calls,
    comparable,
    dead_base_url,
    record,
    results,
    sources,
    summary,
)

pytestmark = pytest.mark.timeout(900)

MODEL = "openai-compatible/loopback"
TASKS = ("roman", "flatten", "word_count")


def run_args(out: Path, *extra: str, model: str = MODEL) -> list[str]:
    args = ["run", "example_coding", "react", model, "-o", str(out), "--json", *extra]
    for task in TASKS:
        args += ["-t", task]
    return args


def solver_failing_flatten(request: dict) -> dict:
    """The reference solution for every task but ``flatten`` (a wrong one): scores 1, 1, 0."""
    answer = solver(request)
    call = answer["tool_calls"][0]["function"]
    if call["name"] == "write_file" and "def flatten" in json.loads(call["arguments"])["content"]:
        call["arguments"] = json.dumps({"path": "solution.py", "content": "def flatten(x):\n    return x\n"})
    return answer


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("replay") / "live"
    proc, requests = record(solver_failing_flatten, *run_args(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(requests) == 3 * len(TASKS)
    assert summary(out)["status_counts"] == {"COMPLETED": len(TASKS)}
    assert {k[0]: r["metrics"]["score"] for k, r in results(out).items()} == {
        "roman": 1.0, "flatten": 0.0, "word_count": 1.0}
    return out


def test_a_replay_without_a_provider_gives_the_recorded_run(recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "replayed"
    proc = agentcompass(*run_args(out, "--replay", str(recorded), "--model-base-url", dead_base_url()))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert results(out) == results(recorded)
    assert calls(out) == calls(recorded)
    assert set(sources(out)) == {"replay"}
    assert comparable(summary(out)) == comparable(summary(recorded))
    assert summary(out)["usage"]["agent"]["replayed"] == 3 * len(TASKS)
    info = json.loads((out / "run.json").read_text())
    assert info["model_calls"]["replay"]["run_id"] == json.loads((recorded / "run.json").read_text())["run_id"]
    assert info["request"]["seed"] == json.loads((recorded / "run.json").read_text())["request"]["seed"]
    compared = agentcompass("results", "compare", str(recorded), str(out), "--json")
    assert compared.returncode == 0, compared.stderr
    [comparison] = json.loads(compared.stdout)
    assert comparison["n_shared_tasks"] == len(TASKS)
    for row in comparison["metrics"]:
        assert row["difference"] == 0 and row["b_better"] == row["b_worse"] == 0, row
        assert row["equal"] == len(TASKS), row


def test_a_changed_system_prompt_is_a_miss_naming_the_task_call_and_difference(recorded: Path,
                                                                              tmp_path: Path) -> None:
    out = tmp_path / "changed"
    proc = agentcompass(*run_args(out, "--replay", str(recorded), "--model-base-url", dead_base_url(), "-t",
                                  "roman", "--harness-arg", "system_prompt=You are terse. Work in {workdir}."))
    assert proc.returncode == 1, proc.stderr[-3000:]
    by_task = {k[0]: r for k, r in results(out).items()}
    for task in TASKS:
        result = by_task[task]
        assert result["status"] == "RUN_ERROR", result
        error = result["error"]
        assert error.startswith(f"replay miss: task '{task}' (trial 1), agent call 1:"), error
        assert "messages[0].content differs" in error, error
        assert "-You are an autonomous agent" in error and "+You are terse. Work in <tmp>." in error, error
    assert summary(out)["status_counts"] == {"RUN_ERROR": len(TASKS)}
    # Issue 32, item 5: the console line, the task table and the task's own view keep what differs.
    lines = [ln for ln in proc.stderr.splitlines() if "RUN_ERROR" in ln and "replay miss" in ln]
    assert len(lines) == len(TASKS), proc.stderr[-3000:]
    for line in lines:
        assert "replay miss: task" in line and "first difference from recorded agent call 1:" in line, line
        assert line.rstrip().rstrip("'\"").endswith("+You are terse. Work in <tmp>."), line
    shown = agentcompass("results", "show", str(out), "--tasks")
    assert shown.returncode == 0, shown.stderr
    rows = [ln for ln in shown.stdout.splitlines() if "replay miss" in ln]
    assert len(rows) == len(TASKS) and all("+You are terse. Work in <tmp>." in row for row in rows), shown.stdout
    assert f"results show {out} --task ID" in shown.stdout
    whole = agentcompass("results", "show", str(out), "--task", "roman")
    assert whole.returncode == 0, whole.stderr
    assert by_task["roman"]["error"].splitlines()[0] in whole.stdout and "    +You are terse." in whole.stdout
    missing = agentcompass("results", "show", str(out), "--task", "nosuch")
    assert missing.returncode == 1 and "no final result of task 'nosuch'" in missing.stderr, missing.stderr


def test_with_replay_miss_live_the_misses_go_to_the_live_model_and_are_marked(recorded: Path,
                                                                            tmp_path: Path) -> None:
    out = tmp_path / "live"
    proc, requests = record(solver_failing_flatten, *run_args(out, "--replay", str(recorded), "--replay-miss", "live",
                                              "--harness-arg", "system_prompt=You are terse. Work in {workdir}."))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(requests) == 3 * len(TASKS)  # every call missed (the prompt changed) and went live
    assert set(sources(out)) == {"live"}
    assert summary(out)["usage"]["agent"]["replay_live"] == 3 * len(TASKS)
    assert {k[0]: r["metrics"]["score"] for k, r in results(out).items()} == {"roman": 1.0, "flatten": 0.0, "word_count": 1.0}


@pytest.mark.parametrize(("args", "words"), [
    (["--replay", "/nonexistent/run"], ["--replay", "does not exist"]),
    (["--replay-miss", "live"], ["--replay-miss", "needs --replay"]),
    (["--replay-latency"], ["--replay-latency", "needs --replay"]),
    (["--cache-expiry", "7d"], ["--cache-expiry needs --cache"]),
    (["--cache", "CACHE", "--cache-expiry", "soon"], ["--cache-expiry", "'soon'"]),
])
def test_bad_replay_and_cache_options_are_usage_errors(tmp_path: Path, args: list[str], words: list[str]) -> None:
    args = [a.replace("CACHE", str(tmp_path / "cache")) for a in args]
    proc = agentcompass("run", "example_coding", "react", MODEL, "-o", str(tmp_path / "r"), *args)
    assert proc.returncode == 2, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()


def test_a_run_config_file_replays_with_its_paths_taken_from_the_file(recorded: Path, tmp_path: Path) -> None:
    config = recorded.parent / "replay.toml"
    config.write_text(f'benchmark = "example_coding"\nharness = "react"\nmodel = "{MODEL}"\n'
                      f'task_ids = {list(TASKS)!r}\nreplay = "{recorded.name}"\nreplay_latency = true\n'
                      f'model_base_url = "{dead_base_url()}"\n'.replace("'", '"'))
    out = tmp_path / "configured"
    proc = agentcompass("run", "--config", str(config), "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads((out / "run.json").read_text())
    assert info["model_calls"]["replay"] == {"run_dir": str(recorded.resolve()), "run_id": info["model_calls"][
        "replay"]["run_id"], "miss": "error", "latency": True}
    assert results(out) == results(recorded)
    bad = recorded.parent / "bad.toml"
    bad.write_text('replay_latency = "yes"\n')
    proc = agentcompass("run", "example_coding", "react", MODEL, "--config", str(bad), "-o", str(tmp_path / "b"))
    assert proc.returncode == 2 and "replay_latency" in proc.stderr and "true or false" in proc.stderr, proc.stderr


def test_an_openai_run_replays_with_no_key_and_no_network(tmp_path: Path) -> None:
    """The issue's "done when", as a user types it: record with openai/..., replay with no key, no provider."""
    with LoopbackOpenAI(solver_failing_flatten, api_key="sk-replay-test") as server:
        proc = agentcompass(*run_args(tmp_path / "A", "--model-base-url", server.base_url,
                                      model="openai/gpt-4o-mini"), env={"OPENAI_API_KEY": "sk-replay-test"})
        assert proc.returncode == 0, proc.stderr[-3000:]
    proc = agentcompass(*run_args(tmp_path / "B", "--replay", str(tmp_path / "A"), model="openai/gpt-4o-mini"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert results(tmp_path / "B") == results(tmp_path / "A")
    assert calls(tmp_path / "B") == calls(tmp_path / "A")
    assert comparable(summary(tmp_path / "B")) == comparable(summary(tmp_path / "A"))
    compared = agentcompass("results", "compare", str(tmp_path / "A"), str(tmp_path / "B"))
    assert compared.returncode == 0 and "+0.0000" in compared.stdout and "0/0/3" in compared.stdout, compared.stdout
    live = agentcompass(*run_args(tmp_path / "C", "--replay", str(tmp_path / "A"), "--replay-miss", "live",
                                  model="openai/gpt-4o-mini"))
    assert live.returncode == 2 and "OPENAI_API_KEY" in live.stderr  # a miss may go live: the key is needed
