"""Interrupting a run through the real CLI: Ctrl-C, a second Ctrl-C during clean-up."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.helpers.cli_processes import read_jsonl, start_cli, wait_for


@pytest.mark.parametrize("gap", [0.45, 0.6])  # past the echo window: a second Ctrl-C, not uv forwarding the first
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


def test_the_calls_of_an_attempt_cut_by_ctrl_c_are_recorded_and_counted(tmp_path):
    """The calls of the attempt in flight at Ctrl-C (those finished, and the one cut mid-way) are in trajectories.jsonl
    and in the usage of its CANCELLED record in attempts.jsonl, so the summary's usage counts them."""
    run_dir = tmp_path / "run"
    proc = start_cli("run", "example_interactive", "none", "mock", "-m", "latency=1", "-c", "1", "-o",
                     str(run_dir), testing=False)
    wait_for(lambda: (run_dir / "results.jsonl").exists() and (run_dir / "results.jsonl").read_text().strip(),
             what="the first task's result")
    time.sleep(1.5)  # the second task's first call has finished; its second is in flight
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    (cancelled,) = read_jsonl(run_dir / "attempts.jsonl")
    assert cancelled["status"] == "CANCELLED"
    key = (cancelled["task_id"], cancelled["trial"], cancelled["attempt"])
    calls = [c for c in read_jsonl(run_dir / "trajectories.jsonl") if (c["task_id"], c["trial"], c["attempt"]) == key]
    assert calls, "the cancelled attempt's calls are missing from trajectories.jsonl"
    *finished, cut = calls  # (on a busy machine the first call may still be in flight too)
    assert all(c["cut"] is None and c["completion_tokens"] > 0 for c in finished), finished
    assert cut["cut"] and cut["prompt_tokens"] > 0, cut
    usage = cancelled["usage"]["models"]["agent"]
    assert usage["calls"] == len(calls)
    assert usage["prompt_tokens"] == sum(c["prompt_tokens"] for c in calls)
    assert usage["completion_tokens"] == sum(c["completion_tokens"] for c in calls)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["usage_retried"]["agent"]["calls"] == len(calls)
    assert summary["usage"]["agent"]["calls"] == len(read_jsonl(run_dir / "trajectories.jsonl"))


@pytest.mark.parametrize(("gap", "forced"), [(0.0, False), (0.05, False), (1.5, True)])
def test_one_ctrl_c_forwarded_twice_is_one_but_a_later_second_one_is_a_second(tmp_path, gap, forced):
    """``uv run`` forwards the SIGINT its child already got from the terminal: two SIGINTs within a moment are
    one Ctrl-C (a graceful stop); a second one 1.5 s later, during the (slow) clean-up, is a second Ctrl-C."""
    run_dir, work = tmp_path / "run", tmp_path / "work"
    work.mkdir()
    proc = start_cli("run", "scripted", "none", "mock", "-e", "counting", "-b", "n=2", "-b", "sleep=30", "-c", "2",
                     "-o", str(run_dir), "--env-arg", f"root={work}", "--env-arg", "close_delay=3")
    wait_for(lambda: len([p for p in work.rglob("*") if p.is_dir()]) >= 2, what="two live working directories")
    proc.send_signal(signal.SIGINT)
    time.sleep(gap)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.count("SIGINT: stopping") == 1, stderr
    assert ("SIGINT: still stopping" in stderr) is forced, stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["interrupted"] is True
