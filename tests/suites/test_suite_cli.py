"""Suites through the real CLI: a 2 benchmarks x 2 harnesses x 2 model variants grid, its leaderboard against each
cell's own summary.json and `results compare`, a bad cell, SIGKILL then --resume, two invocations on one
directory."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli_processes import read_jsonl, run_cli_subprocess, start_cli, wait_for

GRID = """
baseline = "example_coding-react-e0"

[defaults]
model = "mock"
trials = 2
seed = 11
concurrency = 4

[matrix]
benchmark = ["example_coding", "example_interactive"]
harness = ["react", "none"]
model_args = [{{ error_rate = "0"{latency} }}, {{ error_rate = "0.5"{latency} }}]
name = "{{benchmark}}-{{harness}}-e{{model_args[error_rate]}}"

[[run]]
name = "bad-option"
benchmark = "example_interactive"
harness = "none"
model_args = {{ nonsense = "1" }}
"""
CELLS = ["example_coding-react-e0", "example_coding-react-e0.5", "example_interactive-none-e0",
         "example_interactive-none-e0.5"]
SKIPPED = ["example_coding-none-e0", "example_coding-none-e0.5", "example_interactive-react-e0",
           "example_interactive-react-e0.5"]


def write_suite(tmp_path: Path, latency: float | None = None) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(GRID.format(latency=f', latency = "{latency}"' if latency else ""))
    return path


def cli(*args: str, timeout: float = 300) -> Any:
    return run_cli_subprocess(*args, timeout=timeout, testing=False)


def show(out: Path, *extra: str) -> dict[str, Any]:
    done = cli("suite", "show", str(out), "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def keys(run_dir: Path) -> list[tuple[str, int]]:
    return [(r["task_id"], r["trial"]) for r in read_jsonl(run_dir / "results.jsonl")]


def planned(run_dir: Path) -> set[tuple[str, int]]:
    info = json.loads((run_dir / "run.json").read_text())["planned"]
    return {(t, trial) for t in info["tasks"] for trial in range(1, info["trials"] + 1)}


@pytest.mark.slow  # a long end-to-end run; CI runs it (--all-tests)
def test_a_grid_runs_and_its_leaderboard_is_each_cells_own_figures(tmp_path):
    out = tmp_path / "out"
    done = cli("suite", "run", str(write_suite(tmp_path)), "-o", str(out))
    assert done.returncode == 1, done.stderr  # the bad cell failed; the others completed
    for name in SKIPPED:  # an ordinary benchmark with `none`, a harness-free one with a harness: skipped, noted
        assert f"cell {name}: skipped" in done.stderr
    assert "cell bad-option: failed — could not start: model 'mock' has no option 'nonsense'" in done.stderr
    assert not (out / "bad-option" / "results.jsonl").exists()  # checked before anything ran
    board = show(out)
    assert [b["benchmark"] for b in board["benchmarks"]] == ["example_coding", "example_interactive"]
    assert {c["name"] for b in board["benchmarks"] for c in b["cells"]} == set(CELLS)
    assert [c["name"] for c in board["not_run"]] == ["bad-option"]
    assert sorted(c["name"] for c in board["skipped"]) == sorted(SKIPPED)
    for bench in board["benchmarks"]:
        means = [c["mean"] for c in bench["cells"]]
        assert means == sorted(means, reverse=True)
        for cell in bench["cells"]:
            run_dir = out / cell["name"]
            summary = json.loads((run_dir / "summary.json").read_text())
            assert summary["status_counts"] == {"COMPLETED": summary["n_finished"]}
            assert sorted(keys(run_dir)) == sorted(planned(run_dir))  # every (task, trial) once
            overall = summary["metrics"]["overall"][summary["primary_metric"]]
            assert cell["mean"] == overall["mean"] and cell["ci95"] == overall["ci95"]
            assert cell["errors"] == sum(v for k, v in summary["status_counts"].items() if k != "COMPLETED")
            assert cell["tokens"] == sum(u["prompt_tokens"] + u["completion_tokens"]
                                         for u in summary["usage"].values())
            assert cell["duration_s"] == summary["duration_s"]
            top = max(summary["metrics"]["pass_k"], key=lambda p: p["k"])
            assert cell["pass_hat_k"] == {"k": 2, "value": top["pass_hat_k"]}
            request = json.loads((run_dir / "run.json").read_text())["request"]
            assert request["trials"] == 2 and request["seed"] == 11
            if cell["name"] == bench["baseline"]:
                assert cell["difference"] is None
                continue
            # the paired difference is the number `results compare` prints
            compared = cli("results", "compare", str(out / bench["baseline"]), str(run_dir), "--json")
            metric = next(m for m in json.loads(compared.stdout)[0]["metrics"]
                          if m["metric"] == bench["primary_metric"] and m["category"] is None)
            assert cell["difference"]["difference"] == metric["difference"]
            assert cell["difference"]["ci95"] == metric["ci95"]
            # and so are its noise figures
            assert cell["difference"]["mde"] == metric["mde"]
            assert cell["difference"]["within_noise"] == metric["within_noise"]
    # the two error rates differ on the interactive benchmark (the mock's errors fail tool calls)
    interactive = board["benchmarks"][1]["cells"]
    assert len({c["mean"] for c in interactive}) == 2
    # --baseline moves the differences
    again = show(out, "--baseline", "example_interactive-none-e0.5")
    base = next(b for b in again["benchmarks"] if b["benchmark"] == "example_interactive")
    assert base["baseline"] == "example_interactive-none-e0.5"
    text = cli("suite", "show", str(out))
    assert "paired difference vs example_coding-react-e0" in text.stdout and "bad-option: failed" in text.stdout
    assert "difference [95% CI] MDE" in text.stdout
    for bench in board["benchmarks"]:
        for cell in bench["cells"]:
            d = cell["difference"]
            if d is not None and d["mde"] is not None:
                line = next(row for row in text.stdout.splitlines() if row.startswith(cell["name"] + " "))
                assert f"MDE {d['mde']:.3f}" in line and ("within noise" in line) == d["within_noise"]
    # a resume runs nothing finished again; the bad cell is tried again (and fails again)
    resumed = cli("suite", "run", "--resume", str(out))
    assert "cell bad-option: failed" in resumed.stderr
    assert "starting" not in resumed.stderr and "resuming" not in resumed.stderr
    for name in CELLS:
        assert Counter(keys(out / name)).most_common(1)[0][1] == 1


def test_suite_show_of_a_directory_that_is_not_a_suite(tmp_path):
    done = cli("suite", "show", str(tmp_path))
    assert done.returncode == 2 and "is not a suite directory" in done.stderr
    done = cli("suite", "run", str(tmp_path / "missing.toml"))
    assert done.returncode == 2 and "cannot read suite file" in done.stderr
    unknown = cli("suite", "show", str(tmp_path), "--baseline", "x")
    assert unknown.returncode == 2


def _results_count(out: Path) -> int:
    return sum(len(read_jsonl(out / name / "results.jsonl")) for name in CELLS if (out / name).is_dir())


@pytest.mark.slow
def test_sigkill_mid_suite_then_resume_runs_every_cell_task_trial_once(tmp_path):
    out = tmp_path / "out"
    proc = start_cli("suite", "run", str(write_suite(tmp_path, latency=0.05)), "-o", str(out), "--concurrency", "3",
                     testing=False)
    try:
        wait_for(lambda: _results_count(out) >= 6, timeout=180, what="some finished tasks")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = _results_count(out)
    resumed = cli("suite", "run", "--resume", str(out), "--concurrency", "3")
    assert resumed.returncode == 1, resumed.stderr  # the bad cell still fails; everything else finishes
    assert "resuming in" in resumed.stderr  # the killed invocation's locks did not block
    total = 0
    for name in CELLS:
        got = keys(out / name)
        assert sorted(got) == sorted(planned(out / name)), name  # every (cell, task, trial) exactly once
        total += len(got)
        summary = json.loads((out / name / "summary.json").read_text())
        assert summary["n_unfinished"] == 0
    assert total > before


@pytest.mark.slow
def test_two_invocations_on_one_directory_never_run_a_cell_twice(tmp_path):
    out = tmp_path / "out"
    first = start_cli("suite", "run", str(write_suite(tmp_path, latency=0.05)), "-o", str(out), testing=False)
    try:
        wait_for(lambda: (out / "suite.json").exists(), timeout=120, what="suite.json")
        time.sleep(0.5)
        second = cli("suite", "run", "--resume", str(out))
        first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert "another invocation" in second.stderr
    # a second new suite in the same directory is refused
    third = cli("suite", "run", str(tmp_path / "suite.toml"), "-o", str(out))
    assert third.returncode == 2 and "already holds a suite" in third.stderr
    for name in CELLS:
        got = keys(out / name)
        assert sorted(got) == sorted(planned(out / name)), name
        logs = read_jsonl(out / name / "logs.jsonl") if (out / name / "logs.jsonl").exists() else []
        starts = [r for r in logs if r.get("event") == "run.started"]
        assert len(starts) <= 1 + ("resuming" in second.stderr)


EDITABLE = """
[defaults]
model = "mock"
benchmark = "example_interactive"
harness = "none"
limit = 2

[[run]]
name = "good"

[[run]]
name = "bad"
model_args = {{ {bad} = "0" }}
"""


def test_a_cell_that_could_not_start_is_fixed_by_editing_the_suite_file_then_resuming(tmp_path):
    suite, out = tmp_path / "suite.toml", tmp_path / "out"
    suite.write_text(EDITABLE.format(bad="nonsense"))
    first = cli("suite", "run", str(suite), "-o", str(out))
    assert first.returncode == 1, first.stderr
    assert "bad" in first.stderr and "nonsense" in first.stderr
    assert f"fix its definition in {suite} first" in first.stderr, first.stderr
    good_run = json.loads((out / "good" / "run.json").read_text())

    # Edit both cells: the one that never started takes it, the one that ran keeps its recorded definition.
    suite.write_text(EDITABLE.format(bad="error_rate").replace('limit = 2', 'limit = 2\nseed = 99', 1))
    resumed = cli("suite", "run", "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr
    assert f"cell bad: took the edited definition from {suite}" in resumed.stderr, resumed.stderr
    assert "cell good: keeps its recorded definition" in resumed.stderr, resumed.stderr
    board = show(out)
    states = {c["name"]: c for b in board["benchmarks"] for c in b["cells"]}
    assert set(states) == {"good", "bad"}
    assert json.loads((out / "bad" / "run.json").read_text())["request"]["model_args"] == {"error_rate": "0"}
    assert json.loads((out / "good" / "run.json").read_text())["request"]["seed"] == good_run["request"]["seed"]
    record = json.loads((out / "suite.json").read_text())
    cells = {c["name"]: c["options"] for c in record["cells"]}
    assert cells["bad"]["model_args"] == {"error_rate": "0"} and "seed" not in cells["good"]
    assert read_jsonl(out / "bad" / "results.jsonl")
