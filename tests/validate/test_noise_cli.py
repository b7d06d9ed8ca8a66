"""``results compare`` says beside each paired difference the smallest one the runs could detect and whether it
is within noise; ``results plan`` (and ``compare --plan``) says the tasks by trials a difference needs — on real
runs of Harbor tasks whose verdicts flip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harbor.taskdirs import write_task
from tests.helpers.cli_processes import run_cli_subprocess


def coin_tasks(root: Path, counter: Path) -> Path:
    for i in range(5):
        write_task(root, f"coin-{i}", instruction="Write hello to /app/hello.txt.",
                   test=f"n=$(( $(cat {counter} 2>/dev/null || echo 0) + {i} + 1 )); echo $n > {counter}\n"
                        "echo $(( n % 2 )) > /logs/verifier/reward.txt\n",
                   solve="echo hello > /app/hello.txt\n")
    write_task(root, "steady", instruction="x", test="echo 1 > /logs/verifier/reward.txt\n", solve="true\n")
    return root


def run(tasks: Path, out: Path) -> None:
    done = run_cli_subprocess("run", "harbor", "oracle", "mock", "-b", f"path={tasks}", "--trials", "3", "-c", "1",
                              "-o", str(out), testing=False)
    assert done.returncode == 0, done.stderr


def test_compare_prints_the_mde_and_within_noise_and_plan_sizes_a_study(tmp_path: Path) -> None:
    tasks = coin_tasks(tmp_path / "tasks", tmp_path / "counter")
    run(tasks, tmp_path / "a")
    run(tasks, tmp_path / "b")
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["verdicts"]["flip_rates"]["steady"] == 0.0
    assert summary["verdicts"]["n_flipping"] >= 1 and summary["verdicts"]["mean_flip_rate"] > 0

    shown = run_cli_subprocess("results", "compare", str(tmp_path / "a"), str(tmp_path / "b"), testing=False)
    assert shown.returncode == 0, shown.stderr
    assert "MDE" in shown.stdout and "within noise" in shown.stdout
    data = json.loads(run_cli_subprocess("results", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json",
                                         testing=False).stdout)
    metric = data[0]["metrics"][0]
    assert metric["within_noise"] is True and metric["mde"] > abs(metric["difference"])
    assert metric["mde"] == pytest.approx(2.8015852 * metric["stderr"], rel=1e-6)

    plan = run_cli_subprocess("results", "plan", str(tmp_path / "a"), "--difference", "0.1", "--json",
                              testing=False)
    assert plan.returncode == 0, plan.stderr
    rows = {r["trials"]: r["tasks"] for r in json.loads(plan.stdout)["rows"]}
    assert rows[1] >= rows[3] >= rows[10] >= 2
    paired = run_cli_subprocess("results", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--plan", "0.1",
                                testing=False)
    assert paired.returncode == 0 and "tasks needed" in paired.stdout and "paired differences" in paired.stdout
    bad = run_cli_subprocess("results", "plan", str(tmp_path / "a"), "--difference", "0", testing=False)
    assert bad.returncode == 2 and "--difference must be a non-zero number" in bad.stderr
