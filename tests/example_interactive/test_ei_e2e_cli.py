"""End to end through the CLI: ``agentcompass run example_interactive none mock`` on the local environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ei_support import EXPECTED_MOCK_SCORES

AGENTCOMPASS = Path(sys.executable).parent / "agentcompass"

try:
    import agentcompass.cli.main  # noqa: F401
except ImportError:  # the core's CLI is not there yet
    pytestmark = pytest.mark.skip(reason="agentcompass CLI not available")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run([str(AGENTCOMPASS), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def final_records(run_dir: Path) -> dict[str, dict]:
    records: dict[str, dict] = {}
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        records[record["task_id"]] = record  # the last record of a task is its final one
    return records


def test_full_run_with_the_mock_model(tmp_path: Path):
    out = tmp_path / "run"
    proc = cli("run", "example_interactive", "none", "mock", "--json", "--output", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["benchmark"] == "example_interactive" and summary["harness"] == "none"
    assert summary["n_tasks"] == len(EXPECTED_MOCK_SCORES)
    assert summary["status_counts"] == {"COMPLETED": len(EXPECTED_MOCK_SCORES)}
    assert (tmp_path / summary["run_dir"]).resolve() == out.resolve()
    assert json.loads((out / "summary.json").read_text())["status_counts"] == summary["status_counts"]

    records = final_records(out)
    assert set(records) == set(EXPECTED_MOCK_SCORES)
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == len(EXPECTED_MOCK_SCORES)  # exactly one record per task, no retries needed
    assert {t: r["metrics"]["score"] for t, r in records.items()} == EXPECTED_MOCK_SCORES
    for task_id, record in records.items():
        assert record["status"] == "COMPLETED"
        official = record["artifacts"]["official_result"]
        assert official["termination"] == "user_stop", task_id
        assert record["final_answer"] == official["final_answer"]
        assert record["artifacts"]["evaluation"]["db_match"] is (record["metrics"]["score"] == 1.0)

    overall = summary["metrics"]["overall"]["score"]
    assert overall["label"] == "Reward"
    expected_mean = sum(EXPECTED_MOCK_SCORES.values()) / len(EXPECTED_MOCK_SCORES)
    assert overall["mean"] == pytest.approx(expected_mean)
    assert 0 < overall["mean"] < 1
    by_category = summary["metrics"]["by_category"]
    assert set(by_category) == {"create", "update", "policy", "multi-step"}
    assert by_category["create"]["metrics"]["score"]["mean"] == 1.0
    # the gateway's per-run token never lands in the results
    run_json = (out / "run.json").read_text()
    assert "OPENAI_API_KEY" not in run_json


def test_task_id_selects_tasks(tmp_path: Path):
    proc = cli(
        "run", "example_interactive", "none", "mock", "--json",
        "-t", "create_basic", "--task-id", "update_two_tasks",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["n_tasks"] == 2
    run_dir = tmp_path / summary["run_dir"]  # relative to the working directory: runs/RUN_ID
    assert run_dir.is_dir() and run_dir.resolve().parent == (tmp_path / "runs").resolve()
    scores = {t: r["metrics"]["score"] for t, r in final_records(run_dir).items()}
    assert scores == {"create_basic": 1.0, "update_two_tasks": 0.0}


def test_benchmark_args(tmp_path: Path):
    out = tmp_path / "run"
    proc = cli(
        "run", "example_interactive", "none", "mock", "--json", "--output", str(out),
        "-b", "category=policy", "--benchmark-arg", "max_turns=1",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = final_records(out)
    assert set(records) == {t for t in EXPECTED_MOCK_SCORES if t.startswith("policy_")}
    terminations = {t: r["artifacts"]["official_result"]["termination"] for t, r in records.items()}
    assert terminations["policy_unknown_user"] == "max_turns"  # the mock's tool call used the only turn
    assert all(r["artifacts"]["official_result"]["turns"] == 1 for r in records.values())


def test_unknown_benchmark_option_is_a_usage_error(tmp_path: Path):
    proc = cli("run", "example_interactive", "none", "mock", "-b", "max_turn=3", cwd=tmp_path)
    assert proc.returncode == 2
    assert "max_turn" in proc.stderr and "max_turns, timeout, category" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_runner_timeout_is_a_run_error_and_exit_status_1(tmp_path: Path):
    out = tmp_path / "run"
    proc = cli(
        "run", "example_interactive", "none", "mock", "--json", "--output", str(out),
        "-t", "create_basic", "-b", "timeout=0.001",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["status_counts"] == {"RUN_ERROR": 1}
    record = final_records(out)["create_basic"]
    assert record["status"] == "RUN_ERROR" and "timed out" in record["error"]
    assert record["metrics"] == {}


def _docker_ready(tmp_path: Path) -> str | None:
    """Why the docker environment cannot be used here, or None when it can."""
    listing = cli("plugins", "list", "--json", cwd=tmp_path)
    if listing.returncode != 0:
        return "cannot list plugins"
    plugin = next((p for p in json.loads(listing.stdout) if p["name"] == "docker"), None)
    if plugin is None or not plugin["loaded"] or "docker" not in plugin["registers"].get("environment", []):
        return "the docker environment plugin is not available"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "no docker client"
    return None if info.returncode == 0 else "no Docker engine (.ci/docker-up.sh)"


@pytest.mark.docker
def test_docker_run_with_the_mock_model(tmp_path: Path):
    reason = _docker_ready(tmp_path)
    if reason:
        pytest.skip(reason)
    out = tmp_path / "run"
    chosen = ["create_basic", "policy_delete_request", "multi_create_then_complete"]
    args = [a for t in chosen for a in ("-t", t)]
    proc = cli(
        "run", "example_interactive", "none", "mock", "--env", "docker",
        "--json", "--output", str(out), *args,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = final_records(out)
    assert {t: r["metrics"]["score"] for t, r in records.items()} == {t: EXPECTED_MOCK_SCORES[t] for t in chosen}
