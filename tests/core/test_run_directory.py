"""Damaged run directories through the real CLI: damaged and torn lines, a corrupt summary, resume after them."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers.cli_processes import finished_run, read_jsonl, run_cli_subprocess


@pytest.fixture(scope="module")
def four_tasks(tmp_path_factory):
    """One finished run of four tasks, made once for this module's tests (each changes a copy)."""
    return finished_run(tmp_path_factory.mktemp("finished"))


@pytest.mark.parametrize("bad_line", [b"[1, 2]\n", b"null\n", b'{"task_id": "t1", "attempt": "one"}\n',
                                      b"\xff\xfe not utf-8\n", b'{"task_id": 5, "status": "COMPLETED"}\n'])
def test_a_damaged_result_line_is_skipped_with_a_warning_and_its_task_runs_again(tmp_path, bad_line, four_tasks):
    run_dir = shutil.copytree(four_tasks, tmp_path / "r")
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


def test_a_corrupt_summary_is_a_one_line_error_naming_the_file(tmp_path, four_tasks):
    run_dir = shutil.copytree(four_tasks, tmp_path / "r")
    (run_dir / "summary.json").write_text('{"run_id": ')
    shown = run_cli_subprocess("results", "show", str(run_dir))
    assert shown.returncode == 2
    assert shown.stderr.startswith("Error: cannot read") and "summary.json" in shown.stderr
    assert "unexpected" not in shown.stderr and len(shown.stderr.strip().splitlines()) == 1
    (run_dir / "summary.json").write_text('{"run_id": 7}')
    shown = run_cli_subprocess("results", "show", str(run_dir))
    assert shown.returncode == 2 and "summary.json is damaged" in shown.stderr


def test_results_show_does_not_cut_a_torn_tail(tmp_path, four_tasks):
    run_dir = shutil.copytree(four_tasks, tmp_path / "r")
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
