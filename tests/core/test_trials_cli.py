"""Trials, seeds, re-scoring and comparison, through the real CLI on the bundled benchmarks."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.helpers.cli_processes import run_cli_subprocess, start_cli


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def run(*args: str) -> dict:
    proc = run_cli_subprocess("run", *args, "--json", testing=False)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def seeds(run_dir: Path) -> dict[tuple[str, int], int]:
    return {(r["task_id"], r["trial"]): r["seed"] for r in read_jsonl(run_dir / "results.jsonl")}


@pytest.mark.slow  # a long end-to-end run; CI runs it (--all-tests)
def test_trials_with_a_seed_give_ci_and_pass_k_and_the_same_seed_gives_the_same_seeds(tmp_path):
    args = ["example_interactive", "none", "mock", "-m", "error_rate=0.3", "--trials", "4", "--seed", "7", "-n", "6"]
    first = run(*args, "-o", str(tmp_path / "a"))
    assert first["trials"] == 4 and first["seed"] == 7 and first["status_counts"] == {"COMPLETED": 24}
    score = first["metrics"]["overall"]["score"]
    assert score["n"] == 24 and score["n_tasks"] == 6
    low, high = score["ci95"]
    assert low < score["mean"] < high
    assert [p["k"] for p in first["metrics"]["pass_k"]] == [1, 2, 3, 4]
    hats = [p["pass_hat_k"] for p in first["metrics"]["pass_k"]]
    assert hats == sorted(hats, reverse=True) and hats[0] > hats[-1]  # the mock's errors make trials differ
    second = run(*args, "-o", str(tmp_path / "b"))
    assert seeds(tmp_path / "a") == seeds(tmp_path / "b") and len(set(seeds(tmp_path / "a").values())) == 24
    assert second["metrics"] == first["metrics"]
    other = run("example_interactive", "none", "mock", "-m", "error_rate=0.3", "--trials", "4", "--seed", "8",
                "-n", "6", "-o", str(tmp_path / "c"))
    assert set(seeds(tmp_path / "c").values()).isdisjoint(seeds(tmp_path / "a").values())
    assert other["seed"] == 8
    shown = run_cli_subprocess("results", "show", str(tmp_path / "a"), testing=False)
    assert "6 × 4 trials" in shown.stdout and "pass^4=" in shown.stdout and "95% CI" in shown.stdout


def test_a_run_without_seed_records_the_one_it_chose(tmp_path):
    summary = run("example_interactive", "none", "mock", "-n", "2", "-o", str(tmp_path / "r"))
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert isinstance(summary["seed"], int) and info["request"]["seed"] == summary["seed"]


def test_resume_extends_trials_exactly_once_and_refuses_fewer(tmp_path):
    out = tmp_path / "r"
    run("example_interactive", "none", "mock", "-n", "3", "--trials", "2", "--seed", "1", "-o", str(out))
    refused = run_cli_subprocess("run", "--resume", str(out), "--trials", "1", testing=False)
    assert refused.returncode == 2 and "not drop them" in refused.stderr
    extended = run_cli_subprocess("run", "--resume", str(out), "--trials", "4", "--json", testing=False)
    assert extended.returncode == 0, extended.stderr
    pairs = [(r["task_id"], r["trial"]) for r in read_jsonl(out / "results.jsonl")]
    assert len(pairs) == len(set(pairs)) == 12
    assert json.loads(extended.stdout)["trials"] == 4


@pytest.mark.slow  # SIGKILL and resume end to end (a kill and a resume run by default: test_local_env_cli)
def test_sigkill_mid_run_then_resume_leaves_one_record_per_task_and_trial(tmp_path):
    out = tmp_path / "r"
    proc = start_cli("run", "example_interactive", "none", "mock", "-m", "latency=0.05", "--trials", "3",
                     "--seed", "5", "-c", "2", "-o", str(out), testing=False)
    deadline = time.monotonic() + 60
    while len(read_jsonl(out / "results.jsonl")) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    done_before = {(r["task_id"], r["trial"]) for r in read_jsonl(out / "results.jsonl")}
    assert 5 <= len(done_before) < 33
    resumed = run_cli_subprocess("run", "--resume", str(out), "--json", testing=False)
    assert resumed.returncode == 0, resumed.stderr
    pairs = [(r["task_id"], r["trial"]) for r in read_jsonl(out / "results.jsonl")]
    assert len(pairs) == len(set(pairs)) == 33 and done_before <= set(pairs)
    fresh = run("example_interactive", "none", "mock", "--trials", "3", "--seed", "5", "-o", str(tmp_path / "f"))
    assert seeds(out) == seeds(tmp_path / "f")  # the resume used the recorded seed
    assert json.loads(resumed.stdout)["metrics"] == fresh["metrics"]


@pytest.mark.parametrize("benchmark", ["example_interactive", pytest.param("example_coding", marks=pytest.mark.slow)])
def test_evaluate_reproduces_the_metrics_without_running_and_never_touches_the_source(tmp_path, benchmark):
    harness = "none" if benchmark == "example_interactive" else "oracle"
    source = tmp_path / "src"
    original = run(benchmark, harness, "mock", "--trials", "2", "-o", str(source))
    before = {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()}
    proc = run_cli_subprocess("evaluate", str(source), "-o", str(tmp_path / "again"), "--json", testing=False)
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    assert again["metrics"] == original["metrics"] and again["status_counts"] == original["status_counts"]
    assert {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()} == before
    info = json.loads((tmp_path / "again" / "run.json").read_text())
    assert info["derived_from"]["run_dir"] == str(source.resolve())
    assert info["derived_from"]["run_id"] == original["run_id"]
    assert not (tmp_path / "again" / "trajectories.jsonl").exists()  # nothing ran: no model was called


def test_evaluate_keeps_errors_and_uses_the_scorer_as_installed_now(tmp_path):
    source = tmp_path / "src"
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "faults=t1:run=raise", "-b", "mode=fresh",
                              "-o", str(source))
    assert proc.returncode == 1
    proc = run_cli_subprocess("evaluate", str(source), "-o", str(tmp_path / "again"), "--json")
    assert proc.returncode == 1, proc.stderr
    final = {r["task_id"]: r for r in read_jsonl(tmp_path / "again" / "results.jsonl")}
    assert final["t1"]["status"] == "RUN_ERROR" and "run blew up on purpose" in final["t1"]["error"]
    assert final["t0"]["status"] == "COMPLETED" and "score" in final["t0"]["metrics"]


def test_evaluate_refuses_a_benchmark_that_scores_from_the_live_environment(tmp_path):
    source = tmp_path / "src"
    assert run_cli_subprocess("run", "scripted", "none", "mock", "-o", str(source)).returncode == 0
    proc = run_cli_subprocess("evaluate", str(source), "-o", str(tmp_path / "again"))
    assert proc.returncode == 2 and "scores from the live state" in proc.stderr, proc.stderr
    assert not (tmp_path / "again").exists()


@pytest.mark.slow  # a long end-to-end run; CI runs it (--all-tests)
def test_compare_shows_a_paired_difference_and_refuses_runs_it_cannot_pair(tmp_path):
    common = ["example_interactive", "none", "mock", "--trials", "2", "--seed", "11"]
    run(*common, "-m", "error_rate=0.5", "-o", str(tmp_path / "a"))
    run(*common, "-o", str(tmp_path / "b"))
    proc = run_cli_subprocess("results", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json",
                              "--by-category", testing=False)
    assert proc.returncode == 0, proc.stderr
    (comparison,) = json.loads(proc.stdout)
    overall = next(m for m in comparison["metrics"] if m["category"] is None)
    assert comparison["n_shared_tasks"] == 11 and overall["n_tasks"] == 11
    assert math_close(overall["difference"], overall["b"]["mean"] - overall["a"]["mean"])
    # Errors that turn tool calls into text can even help where the policy says to refuse; overall they hurt.
    assert overall["difference"] > 0 and overall["b_better"] > overall["b_worse"]
    assert overall["b_better"] + overall["b_worse"] + overall["equal"] == 11
    low, high = overall["ci95"]
    assert low < overall["difference"] < high
    assert {m["category"] for m in comparison["metrics"]} >= {None, "create", "policy"}
    text = run_cli_subprocess("results", "compare", str(tmp_path / "a"), str(tmp_path / "b"), testing=False)
    assert "B − A" in text.stdout and "paired by task" in text.stdout

    run("example_coding", "oracle", "mock", "-n", "1", "-o", str(tmp_path / "c"))
    other = run_cli_subprocess("results", "compare", str(tmp_path / "a"), str(tmp_path / "c"), testing=False)
    assert other.returncode == 2 and "compare runs of one benchmark" in other.stderr
    run("example_interactive", "none", "mock", "-t", "create_basic", "-o", str(tmp_path / "d"))
    run("example_interactive", "none", "mock", "-t", "update_complete", "-o", str(tmp_path / "e"))
    disjoint = run_cli_subprocess("results", "compare", str(tmp_path / "d"), str(tmp_path / "e"), testing=False)
    assert disjoint.returncode == 2 and "share no finished task" in disjoint.stderr


def math_close(a: float, b: float) -> bool:
    return abs(a - b) < 1e-9


def test_the_scores_index_agrees_with_results_and_is_ignored_when_stale(tmp_path):
    from agentcompass.results.run_dir import RunDirectory

    out = tmp_path / "r"
    run("example_interactive", "none", "mock", "-m", "error_rate=0.4", "--trials", "2", "--seed", "3", "-o",
        str(out))
    assert (out / "scores.json").exists()
    indexed = RunDirectory.open_existing(out).final_scores()
    (out / "scores.json").rename(tmp_path / "scores.json")
    from_lines = RunDirectory.open_existing(out).final_scores()
    assert indexed == from_lines and len(indexed) == 22
    # A results line appended after the index was written (a resume in progress) makes the index stale.
    (tmp_path / "scores.json").rename(out / "scores.json")
    line = next(x for x in (out / "results.jsonl").read_text().splitlines() if '"create_basic"' in x)
    changed = json.loads(line)
    changed["status"], changed["metrics"] = "RUN_ERROR", {}
    with open(out / "results.jsonl", "a") as f:
        f.write(json.dumps(changed) + "\n")
    fresh = RunDirectory.open_existing(out).final_scores()
    assert fresh[("create_basic", changed["trial"])].completed is False
