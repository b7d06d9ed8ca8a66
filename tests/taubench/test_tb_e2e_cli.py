"""End to end through the CLI, on the local environment and in docker: a loopback OpenAI-compatible server plays
the agent (the gold actions as tool calls, or with a wrong argument), the user (its request, then ###STOP###)
and the judge; and the oracle harness with no model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tb_support as s
from agentcompass.testing import LoopbackOpenAI

from tests.helpers.docker_engine import require_engine

SCRIPTED = ("mock/create_task_1", "mock/update_task_1", "mock/impossible_task_1", "airline/14", "retail/2",
            "retail/5")
DOCKER_SCRIPTED = ("mock/create_task_1", "airline/14", "retail/2")
#: Tasks whose gold path writes nothing: a wrong argument in "the last write" changes nothing there.
NO_WRITES = {"mock/impossible_task_1"}


def cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run([sys.executable, "-m", "agentcompass.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def records(run_dir: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        out[record["task_id"]] = record
    return out


def scripted_run(tmp_path: Path, environment: str, task_ids: tuple[str, ...], *, wrong: bool = False,
                 rescore: bool = False) -> tuple[dict, dict[str, dict], Path]:
    out = tmp_path / ("wrong" if wrong else "right")
    requests: list[dict] = []
    responder = s.role_responder(wrong=wrong, judge=s.approving_judge, requests=requests, among=task_ids)
    with LoopbackOpenAI(responder, api_key=None) as server:
        args = ["run", "taubench", "none", "openai-compatible/agent-model", "--model-base-url", server.base_url,
                "--user-model", "openai-compatible/user-model", "--judge-model", "openai-compatible/judge-model",
                "-b", "domain=mock,airline,retail", "--env", environment, "--json", "-o", str(out)]
        for task_id in task_ids:
            args += ["-t", task_id]
        proc = cli(*args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout)
        if rescore:
            again = cli("evaluate", str(out), "-o", str(tmp_path / "rescored"), "--env", environment, "--json",
                        cwd=tmp_path)
            assert again.returncode == 0, again.stderr[-3000:]
            rescored = records(tmp_path / "rescored")
            assert {t: r["metrics"] for t, r in rescored.items()} == \
                {t: r["metrics"] for t, r in records(out).items()}
    assert {s.role_of(r) for r in requests} == {"agent", "user", "judge"}
    assert {r["model"] for r in requests} == {"agent-model", "user-model", "judge-model"}
    return summary, records(out), out


def check_scripted(summary: dict, results: dict[str, dict], run_dir: Path, task_ids: tuple[str, ...]) -> None:
    assert summary["status_counts"] == {"COMPLETED": len(task_ids)}
    assert {t: r["metrics"]["reward"] for t, r in results.items()} == dict.fromkeys(task_ids, 1.0)
    for task_id, record in results.items():
        official = record["artifacts"]["official_result"]
        assert official["termination_reason"] == "user_stop" and official["mode"] == "run", task_id
        assert record["artifacts"]["evaluation"]["reward"] == 1.0
    assert len(list(run_dir.glob("artifacts/*/attempt-1/trajectory.json"))) == len(task_ids)
    calls = [json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert {c.get("role") for c in calls} == {"agent", "user", "judge"}
    by_domain = summary["metrics"]["by_category"]
    assert set(by_domain) == {t.split("/")[0] for t in task_ids}


def check_wrong(results: dict[str, dict], task_ids: tuple[str, ...]) -> None:
    expected = {t: 1.0 if t in NO_WRITES else 0.0 for t in task_ids}
    assert {t: r["metrics"]["reward"] for t, r in results.items()} == expected
    for task_id in task_ids:
        if task_id not in NO_WRITES:
            assert results[task_id]["metrics"]["db"] == 0.0, task_id
            assert results[task_id]["artifacts"]["evaluation"]["db_check"]["db_match"] is False


@pytest.mark.slow
def test_a_scripted_conversation_scores_1_and_a_wrong_argument_0_locally(tmp_path: Path):
    summary, results, run_dir = scripted_run(tmp_path, "local", SCRIPTED, rescore=True)
    check_scripted(summary, results, run_dir, SCRIPTED)
    _, wrong, _ = scripted_run(tmp_path, "local", SCRIPTED, wrong=True)
    check_wrong(wrong, SCRIPTED)


def test_oracle_through_the_cli(tmp_path: Path):
    proc = cli("run", "taubench", "oracle", "mock", "--json", "-o", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = records(tmp_path / "o")
    expected = {f"mock/{t}": 0.0 if f"mock/{t}" in s.ORACLE_EXCEPTIONS else 1.0 for t in s.tasks("mock")}
    assert {t: r["metrics"]["reward"] for t, r in results.items()} == expected
    assert not (tmp_path / "o" / "trajectories.jsonl").exists()  # no model was called


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path):
    proc = cli("run", "taubench", "none", "mock", cwd=tmp_path)
    assert proc.returncode == 2 and "needs a user simulator: set --user-model MODEL" in proc.stderr
    proc = cli("run", "taubench", "none", "mock", "--user-model", "mock", "-b", "domain=retail", cwd=tmp_path)
    assert proc.returncode == 2
    assert "40 of the 114 selected taubench tasks" in proc.stderr and "-b nl_assertions=exclude" in proc.stderr
    proc = cli("run", "taubench", "oracle", "mock", "-b", "data_dir=/nowhere", cwd=tmp_path)
    assert proc.returncode == 2 and "data_dir '/nowhere' is not a directory" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()
    listed = cli("tasks", "list", "taubench", "-b", "domain=airline", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 50


@pytest.mark.docker
@pytest.mark.slow
def test_a_scripted_conversation_scores_1_and_a_wrong_argument_0_in_docker(tmp_path: Path):
    require_engine()
    summary, results, run_dir = scripted_run(tmp_path, "docker", DOCKER_SCRIPTED, rescore=True)
    check_scripted(summary, results, run_dir, DOCKER_SCRIPTED)
    _, wrong, _ = scripted_run(tmp_path, "docker", DOCKER_SCRIPTED, wrong=True)
    check_wrong(wrong, DOCKER_SCRIPTED)


@pytest.mark.docker
def test_oracle_in_docker(tmp_path: Path):
    require_engine()
    proc = cli("run", "taubench", "oracle", "mock", "--env", "docker", "--json", "-o", str(tmp_path / "o"),
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = records(tmp_path / "o")
    expected = {f"mock/{t}": 0.0 if f"mock/{t}" in s.ORACLE_EXCEPTIONS else 1.0 for t in s.tasks("mock")}
    assert {t: r["metrics"]["reward"] for t, r in results.items()} == expected


@pytest.mark.docker
def test_docker_without_the_image_uploads_the_runner(tmp_path: Path):
    require_engine()
    proc = cli("run", "taubench", "oracle", "mock", "--env", "docker", "-b", "domain=airline", "-b", "bake=false",
               "-t", "airline/14", "-t", "airline/3", "--json", "-o", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = records(tmp_path / "o")
    assert {t: r["metrics"]["reward"] for t, r in results.items()} == {"airline/14": 1.0, "airline/3": 1.0}
