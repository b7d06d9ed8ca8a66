"""Defects found by trying the CLI as a new user would and under faults (issue 8), each through the real CLI."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli_subprocess, start_cli


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def wait_for(predicate, timeout: float = 60, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def finished_run(tmp_path: Path, n: int = 4) -> Path:
    run_dir = tmp_path / "r"
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-b", f"n={n}", "-o", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    return run_dir


# -- 9, 10: interruption ------------------------------------------------------------------------------


@pytest.mark.parametrize("gap", [0.03, 0.3])
def test_a_second_ctrl_c_still_exits_130_says_the_truth_and_leaves_nothing(tmp_path, gap):
    run_dir, work = tmp_path / "run", tmp_path / "work"
    work.mkdir()
    proc = start_cli("run", "scripted", "none", "mock", "-b", "n=16", "-b", "sleep=0.5", "-c", "8", "-o",
                     str(run_dir), "--env-arg", f"root={work}")
    wait_for(lambda: len([p for p in work.rglob("*") if p.is_dir()]) >= 8, what="eight live working directories")
    proc.send_signal(signal.SIGINT)
    time.sleep(gap)  # during the clean-up, or as the process exits
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "unexpected" not in stderr and "Traceback" not in stderr, stderr
    assert "Interrupted before" not in stderr  # the run did record its state
    assert "--resume" in stderr  # whether the second signal landed in the clean-up ("still stopping") or after
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert sum(summary["status_counts"].values()) + summary["n_unfinished"] == summary["n_planned"] == 16
    leftover = [p for p in work.iterdir() if any(q.is_dir() for q in p.rglob("*"))]
    assert leftover == [], leftover


# -- 11, 12: damaged run directories ------------------------------------------------------------------


@pytest.mark.parametrize("bad_line", [b"[1, 2]\n", b"null\n", b'{"task_id": "t1", "attempt": "one"}\n',
                                      b"\xff\xfe not utf-8\n", b'{"task_id": 5, "status": "COMPLETED"}\n'])
def test_a_damaged_result_line_is_skipped_with_a_warning_and_its_task_runs_again(tmp_path, bad_line):
    run_dir = finished_run(tmp_path)
    lines = (run_dir / "results.jsonl").read_bytes().splitlines(keepends=True)
    kept = [ln for ln in lines if b'"t1"' not in ln]
    (run_dir / "results.jsonl").write_bytes(b"".join(kept[:1]) + bad_line + b"".join(kept[1:]))
    before = (run_dir / "results.jsonl").read_bytes()
    shown = run_cli_subprocess("results", "show", str(run_dir), "--tasks")
    assert shown.returncode == 0, shown.stderr
    assert "results.jsonl:2:" in shown.stderr and "skipped" in shown.stderr
    assert (run_dir / "results.jsonl").read_bytes() == before  # results show changes nothing
    resumed = run_cli_subprocess("run", "--resume", str(run_dir), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming: 3/4 tasks" in resumed.stderr  # the damaged line was not counted
    assert "results.jsonl:2:" in resumed.stderr and "skipped" in resumed.stderr  # and the user is told
    summary = json.loads(resumed.stdout)
    assert summary["status_counts"] == {"COMPLETED": 4}
    valid = [json.loads(ln) for ln in (run_dir / "results.jsonl").read_bytes().splitlines()
             if ln.startswith(b'{"schema_version"')]
    assert sorted(r["task_id"] for r in valid) == ["t0", "t1", "t2", "t3"]


def test_a_corrupt_summary_is_a_one_line_error_naming_the_file(tmp_path):
    run_dir = finished_run(tmp_path)
    (run_dir / "summary.json").write_text('{"run_id": ')
    shown = run_cli_subprocess("results", "show", str(run_dir))
    assert shown.returncode == 2
    assert shown.stderr.startswith("Error: cannot read") and "summary.json" in shown.stderr
    assert "unexpected" not in shown.stderr and len(shown.stderr.strip().splitlines()) == 1
    (run_dir / "summary.json").write_text('{"run_id": 7}')
    shown = run_cli_subprocess("results", "show", str(run_dir))
    assert shown.returncode == 2 and "summary.json is damaged" in shown.stderr


def test_results_show_does_not_cut_a_torn_tail(tmp_path):
    run_dir = finished_run(tmp_path)
    with open(run_dir / "results.jsonl", "a") as f:
        f.write('{"task_id": "t9", "sta')
    before = (run_dir / "results.jsonl").read_bytes()
    assert run_cli_subprocess("results", "show", str(run_dir)).returncode == 0
    assert (run_dir / "results.jsonl").read_bytes() == before


def test_a_torn_result_line_gets_a_new_attempt_number_on_resume(tmp_path):
    run_dir = tmp_path / "r"
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "n=2", "-b", "calls=2", "-o", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    # The process died while writing t1's final line: its trajectory (attempt 1) is there, its result torn.
    lines = (run_dir / "results.jsonl").read_text().splitlines(keepends=True)
    t1 = next(ln for ln in lines if '"t1"' in ln)
    (run_dir / "results.jsonl").write_text("".join(ln for ln in lines if ln is not t1) + t1[: len(t1) // 2])
    resumed = run_cli_subprocess("run", "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    final = {r["task_id"]: r for r in read_jsonl(run_dir / "results.jsonl")}
    assert final["t1"]["attempt"] == 2
    calls = [(c["task_id"], c["attempt"]) for c in read_jsonl(run_dir / "trajectories.jsonl")]
    assert calls.count(("t1", 1)) == 2 and calls.count(("t1", 2)) == 2  # no two sets under one attempt


# -- 16, 17: bad input and setup failures -------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (["--timeout", "0"], "--timeout must be a positive number of seconds, got 0"),
    (["--timeout", "-5"], "--timeout must be a positive number of seconds, got -5"),
    (["--phase-timeout", "prepare=0"], "--phase-timeout prepare must be a positive number"),
    (["--limit", "0"], "--limit must be at least 1"),
    (["-m", "foo=1"], "model 'mock' has no option 'foo'"),
    (["--env-arg", "bogus=1"], "bogus"),
    (["--executor", "nowhere"], "unknown executor 'nowhere'"),
    (["--executor-arg", "x=1"], "takes no options"),
])
def test_bad_options_are_usage_errors_with_exit_2_and_nothing_written(tmp_path, args, message):
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-o", str(tmp_path / "r"), *args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "r").exists()


def test_an_unwritable_output_is_a_setup_error_with_a_plain_message(tmp_path):
    target = "/proc/agentcompass-run"  # not creatable, even for root
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-o", target)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith(f"Error: cannot create run directory {target}") and "unexpected" not in proc.stderr


def test_no_docker_engine_is_a_setup_error_naming_how_to_start_one(tmp_path):
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "--env", "docker", "-o", str(tmp_path / "r"),
                              env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert proc.returncode == 3, proc.stderr
    assert "docker" in proc.stderr.lower() and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_messages_name_a_benchmark_by_its_registered_name_even_when_its_class_has_none(tmp_path):
    # The spec's benchmark class defines no `name`; the runtime gives the instance the name it is registered under.
    proc = run_cli_subprocess("run", "seed_interactive", "nop", "mock", "-o", str(tmp_path / "r"))
    assert proc.returncode == 2
    assert "benchmark 'seed_interactive' drives its own loop" in proc.stderr, proc.stderr
