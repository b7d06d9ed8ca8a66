"""Interrupting a run through the real CLI: Ctrl-C, a second Ctrl-C during clean-up."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.helpers.cli_processes import start_cli, wait_for


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
