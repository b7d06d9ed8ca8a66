"""The ``swebench`` benchmark on a real Docker engine, on local instances in the official shape: every verdict
compared with ``swebench.harness.grading`` called directly on the same log, with the eval script run by hand
in a plain ``docker run``, and with the official harness (``swebench.harness.run_evaluation``) itself."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.testing import run_benchmark

from tests.swebench.instances import GOOD, PY_WRONG_AFTER, Suite

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]


def official_report(row: dict[str, Any], log: str, patch: str | None) -> dict[str, Any]:
    """``get_eval_report`` on ``log``, called directly."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    path = Path(f"/tmp/agentcompass-h25-direct-{os.getpid()}.log")
    path.write_text(log)
    try:
        return get_eval_report(make_test_spec(row), {"instance_id": row["instance_id"], "model_patch": patch,
                                                     "model_name_or_path": "direct"}, str(path), True)[row["instance_id"]]
    finally:
        path.unlink()


def by_hand(row: dict[str, Any], patch: str | None, tmp_path: Path) -> bool:
    """The verdict with nothing but ``docker run``: the patch applied with ``git apply``, the eval script run,
    its output graded by ``get_eval_report``."""
    from swebench.harness.utils import make_test_spec

    (tmp_path / "patch.diff").write_text(patch or "")
    (tmp_path / "eval.sh").write_text(make_test_spec(row).eval_script)
    apply = "git apply --verbose /work/patch.diff >/dev/null 2>&1 && " if patch else ""
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{tmp_path}:/work:ro", "-w", "/testbed",
                           row["image"], "bash", "-c", f"{apply}/bin/bash /work/eval.sh 2>&1"],
                          capture_output=True, text=True, timeout=600)
    return bool(official_report(row, done.stdout, patch or None)["resolved"])


def artifacts(run_dir: Path, task_id: str) -> Path:
    return run_dir / "artifacts" / task_id / "attempt-1"


def check_against_direct_grading(run_dir: Path, row: dict[str, Any], result: RunResult) -> None:
    """Our verdict is the package's on the log the run kept."""
    folder = artifacts(run_dir, row["instance_id"])
    patch = (folder / "model.patch").read_text()
    direct = official_report(row, (folder / "test_output.txt").read_text(), patch)
    assert json.loads((folder / "report.json").read_text())[row["instance_id"]] == direct
    assert result.metrics["resolved"] == (1.0 if direct["resolved"] else 0.0)


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentcompass.cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_oracle_resolves_every_instance_and_nop_none(swebench_suite: Suite, tmp_path: Path) -> None:
    dataset = swebench_suite.write(tmp_path / "good.jsonl", list(GOOD))
    for harness, expected in (("oracle", 1.0), ("nop", 0.0)):
        run_dir = tmp_path / harness
        done = cli("run", "swebench", harness, "mock", "-b", f"dataset={dataset}", "--env", "docker",
                   "--output", str(run_dir), "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        summary = json.loads(done.stdout)
        assert summary["status_counts"] == {"COMPLETED": len(GOOD)}
        results = {r["task_id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
        predictions = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
        assert {p["instance_id"] for p in predictions} == set(GOOD)
        for task_id in GOOD:
            row = swebench_suite.rows[task_id]
            result = results[task_id]
            assert result["metrics"]["resolved"] == expected, (harness, task_id, result)
            prediction = next(p for p in predictions if p["instance_id"] == task_id)
            assert prediction["model_name_or_path"] == f"{harness}/mock"
            if harness == "oracle":
                assert result["metrics"] == {"resolved": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0}
                assert prediction["model_patch"] == row["patch"]
                assert by_hand(row, prediction["model_patch"], tmp_path) is True
                folder = artifacts(run_dir, task_id)
                direct = official_report(row, (folder / "test_output.txt").read_text(), prediction["model_patch"])
                assert direct["resolved"] is True
                assert json.loads((folder / "report.json").read_text())[task_id] == direct
            else:
                assert prediction["model_patch"] == ""
                assert result["artifacts"]["swebench"]["reason"].startswith("no patch")
                assert by_hand(row, None, tmp_path) is False


async def test_a_wrong_patch_with_new_and_binary_files(swebench_suite: Suite, tmp_path: Path) -> None:
    blob = bytes(range(256)) * 4

    async def agent(task, prepared, req, plan, env):  # type: ignore[no-untyped-def]
        await env.write_text("calc/__init__.py", PY_WRONG_AFTER)
        await env.write_text("calc/notes.py", "NOTE = 'untracked, new'\n")
        await env.write_bytes("data/blob.bin", blob)
        await env.exec(["git", "rm", "-q", "README.md"])
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED)

    dataset = swebench_suite.write(tmp_path / "one.jsonl", ["acme__calc-1"])
    run = await run_benchmark("swebench", agent, environment="docker", benchmark_args={"dataset": str(dataset)},
                              run_dir=tmp_path / "run")
    result = run.result("acme__calc-1")
    assert result.status is TaskStatus.COMPLETED, result.error
    assert result.metrics == {"resolved": 0.0, "fail_to_pass": 0.0, "pass_to_pass": 1.0}
    check_against_direct_grading(run.run_dir, swebench_suite.rows["acme__calc-1"], result)
    # the collected patch reproduces the tree, binary file, new file and deletion included
    patch = artifacts(run.run_dir, "acme__calc-1") / "model.patch"
    assert b"GIT binary patch" in patch.read_bytes()
    repo = tmp_path / "repo"
    await asyncio.to_thread(subprocess.run, ["git", "clone", "-q", str(swebench_suite.python.context / "repo"),
                                             str(repo)], check=True)
    await asyncio.to_thread(subprocess.run, ["git", "apply", str(patch)], cwd=repo, check=True)
    assert (repo / "data" / "blob.bin").read_bytes() == blob
    assert (repo / "calc" / "notes.py").read_text() == "NOTE = 'untracked, new'\n"
    assert not (repo / "README.md").exists()
    # the evaluation environment held the artifacts outside the repository: the log shows a clean tree before
    # the patch, nothing named artifacts in /testbed
    log = (artifacts(run.run_dir, "acme__calc-1") / "test_output.txt").read_text()
    assert "artifacts/" not in log.split(">>>>> Start Test Output")[0]


async def test_predictions_are_graded_as_the_official_harness_grades_them(swebench_suite: Suite,
                                                                        tmp_path: Path) -> None:
    rows = dict(swebench_suite.rows)
    for n in (2, 3):
        rows[f"acme__calc-{n}"] = {**rows["acme__calc-1"], "instance_id": f"acme__calc-{n}"}
    ids = ["acme__calc-1", "acme__calc-2", "acme__calc-3", "acme__gocalc-1"]
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text("".join(json.dumps(rows[i]) + "\n" for i in ids))
    not_applying = rows["acme__gocalc-1"]["patch"].replace("return a - b", "return a * b - 7")
    predictions = {
        "acme__calc-1": rows["acme__calc-1"]["patch"],
        "acme__calc-2": swebench_suite.python.wrong_patch,
        "acme__calc-3": "",
        "acme__gocalc-1": not_applying,
    }
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"instance_id": i, "model_name_or_path": "elsewhere", "model_patch": p}) + "\n"
                             for i, p in predictions.items()))
    run = await run_benchmark("swebench", "none", environment="docker", run_dir=tmp_path / "run",
                              benchmark_args={"dataset": str(dataset), "predictions": str(preds)})
    assert run.statuses == {i: TaskStatus.COMPLETED for i in ids}
    assert run.metric() == {"acme__calc-1": 1.0, "acme__calc-2": 0.0, "acme__calc-3": 0.0, "acme__gocalc-1": 0.0}
    assert run.result("acme__calc-3").artifacts["swebench"]["reason"].startswith("no patch")
    reason = run.result("acme__gocalc-1").artifacts["swebench"]["reason"]
    assert reason.startswith("patch did not apply") and "calc.go" in reason
    for task_id in ("acme__calc-1", "acme__calc-2"):
        check_against_direct_grading(run.run_dir, rows[task_id], run.result(task_id))

    # the official harness on the same dataset and predictions
    work = tmp_path / "official"
    work.mkdir()
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "swebench.harness.run_evaluation", "-d", str(dataset), "-p", str(preds),
                           "-id", "h25check", "--max_workers", "2", "--report_dir", str(work)],
                          cwd=work, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(next(work.glob("*.h25check.json")).read_text())
    assert report["resolved_ids"] == ["acme__calc-1"]
    assert set(report["unresolved_ids"]) | set(report["error_ids"]) | set(report["empty_patch_ids"]) == set(ids[1:])
    assert report["empty_patch_ids"] == ["acme__calc-3"]
    assert "acme__gocalc-1" in report["error_ids"]  # upstream: the patch did not apply


async def test_eval_errors_infrastructure_retries_and_missing_images(swebench_suite: Suite, tmp_path: Path) -> None:
    rows = dict(swebench_suite.rows)
    rows["acme__calc-noimage"] = {**rows["acme__calc-1"], "instance_id": "acme__calc-noimage",
                                  "image": "agentcompass-test/no-such-image:never-built"}
    ids = ["acme__calc-broken", "acme__calc-infra", "acme__calc-noimage", "acme__calc-1"]
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text("".join(json.dumps(rows[i]) + "\n" for i in ids))
    run = await run_benchmark("swebench", "oracle", environment="docker", run_dir=tmp_path / "run", retries=1,
                              benchmark_args={"dataset": str(dataset), "pull": "false"})
    broken, infra, missing = (run.result(i) for i in ids[:3])
    assert broken.status is TaskStatus.EVAL_ERROR and "EvalScriptError" in (broken.error or "")
    assert "exit 3" in (broken.error or "")
    assert infra.status is TaskStatus.EVAL_ERROR and "InfrastructureError" in (infra.error or "")
    assert "container_unavailable" in (infra.error or "")
    assert missing.status is TaskStatus.PREPARE_ERROR
    assert "agentcompass-test/no-such-image:never-built is not on this Docker engine" in (missing.error or "")
    assert "docker pull" in (missing.error or "") and "build=local" in (missing.error or "")
    assert run.result("acme__calc-1").metrics["resolved"] == 1.0
    retried = [a["task_id"] for a in run.attempts]
    assert retried.count("acme__calc-infra") == 1 and "acme__calc-broken" not in retried
    assert infra.attempt == 2
    # the package itself calls the kept log an infrastructure failure, and the broken one unresolved
    log = (run.run_dir / "artifacts" / "acme__calc-infra" / "attempt-2" / "test_output.txt").read_text()
    assert official_report(rows["acme__calc-infra"], log, "x")["infra_failure"] is True
    log = (artifacts(run.run_dir, "acme__calc-broken") / "test_output.txt").read_text()
    assert official_report(rows["acme__calc-broken"], log, "x")["resolved"] is False


def test_any_harness_runs_on_it(swebench_suite: Suite, tmp_path: Path) -> None:
    """``react`` with the mock model runs to the end; ``command`` runs a program in /testbed that fixes the bug."""
    dataset = swebench_suite.write(tmp_path / "one.jsonl", ["acme__calc-1"])
    done = cli("run", "swebench", "react", "mock", "-b", f"dataset={dataset}", "--env", "docker",
               "--output", str(tmp_path / "react"), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["status_counts"] == {"COMPLETED": 1}
    assert (tmp_path / "react" / "predictions.jsonl").is_file()
    done = cli("run", "swebench", "command", "mock", "-b", f"dataset={dataset}", "--env", "docker",
               "--harness-arg", "command=grep -q 'add() returns' {instruction_file} && "
                                "sed -i 's/a - b/a + b/' calc/__init__.py",
               "--output", str(tmp_path / "command"), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "command" / "results.jsonl").read_text())
    assert result["metrics"] == {"resolved": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0}, result


def test_a_build_that_cannot_happen_says_why(swebench_rows: Suite, tmp_path: Path) -> None:
    """``build=local`` with a task repository that has no Dockerfile for the instance: the image stays missing,
    and the message names the repository and what to do (swebench's builder itself needs ``docker buildx``)."""
    from agentcompass_swebench.dataset import check_instance
    from agentcompass_swebench.images import ImagePolicy

    row = {**swebench_rows.rows["acme__calc-1"], "image": "agentcompass-test/never-built:x"}
    (tmp_path / "tasks" / "other").mkdir(parents=True)
    (tmp_path / "tasks" / "other" / "task.yaml").write_text("instance_id: other\n")
    policy = ImagePolicy(pull=False, build="local", task_repo=str(tmp_path))
    problems = policy.ensure([check_instance(row, "row")], {"acme__calc-1": row["image"]})
    assert f"{tmp_path} has no tasks/acme__calc-1/Dockerfile" in problems["acme__calc-1"]
    assert "is not on this Docker engine" in problems["acme__calc-1"]
