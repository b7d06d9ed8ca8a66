"""End to end: the real ``agentcompass`` command runs example_coding with the built-in harnesses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ec_support import TASK_IDS, agentcompass, results

pytest.importorskip("agentcompass.cli.main", reason="the agentcompass CLI is not installed")


@pytest.mark.parametrize(("harness", "score"), [("oracle", 1.0), ("nop", 0.0)])
def test_run_with_builtin_harness(tmp_path: Path, harness: str, score: float) -> None:
    run_dir = tmp_path / harness
    proc = agentcompass("run", "example_coding", harness, "mock", "--json", "-o", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["benchmark"] == "example_coding" and summary["harness"] == harness
    assert summary["n_tasks"] == len(TASK_IDS)
    assert summary["status_counts"] == {"COMPLETED": len(TASK_IDS)}
    assert Path(summary["run_dir"]).resolve() == run_dir.resolve()
    records = results(run_dir)
    assert sorted(r["task_id"] for r in records) == sorted(TASK_IDS)
    for record in records:
        assert record["status"] == "COMPLETED", record
        assert record["metrics"] == {"score": score, "tests_passed_fraction": score}, record
        assert record["artifacts"]["submitted"] is (harness == "oracle")


def test_benchmark_args_reach_the_benchmark(tmp_path: Path) -> None:
    run_dir = tmp_path / "math"
    proc = agentcompass(
        "run", "example_coding", "oracle", "mock", "--json", "-o", str(run_dir),
        "-b", "categories=math", "-b", "test_timeout=20",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status_counts"] == {"COMPLETED": 2}
    assert {r["category"] for r in results(run_dir)} == {"math"}


def test_unknown_benchmark_arg_is_a_usage_error(tmp_path: Path) -> None:
    proc = agentcompass("run", "example_coding", "oracle", "mock", "-o", str(tmp_path / "r"), "-b", "colour=red")
    assert proc.returncode == 2
    assert "colour" in proc.stderr and "test_timeout" in proc.stderr
