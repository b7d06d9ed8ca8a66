"""A run's time is its total over every invocation (the first, each ``--resume``), each one listed in
``summary.json``, and the total is what the console, the report and a suite's leaderboard show."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.helpers.cli_processes import run_cli_subprocess, start_cli, wait_for


def test_the_time_of_a_resumed_run_is_the_sum_of_its_invocations(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_cli("run", "scripted", "none", "mock", "-b", "n=4", "-b", "sleep=0.6", "-c", "1", "-o", str(run_dir))
    wait_for(lambda: (run_dir / "results.jsonl").exists() and (run_dir / "results.jsonl").read_text().strip(),
             what="the first result")
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    first = json.loads((run_dir / "summary.json").read_text())
    assert first["duration_s"] >= 0.6 and len(first["invocations"]) == 1

    resumed = run_cli_subprocess("run", "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    second = json.loads((run_dir / "summary.json").read_text())
    idle = run_cli_subprocess("run", "--resume", str(run_dir))  # nothing left to do
    assert idle.returncode == 0, idle.stderr
    third = json.loads((run_dir / "summary.json").read_text())

    invocations = third["invocations"]
    assert len(invocations) == 3
    assert invocations[:2] == second["invocations"] and invocations[:1] == first["invocations"]
    assert third["duration_s"] == pytest.approx(sum(i["duration_s"] for i in invocations), abs=0.002)
    assert invocations[1]["duration_s"] >= 1.2  # the three tasks left, 0.6 s each... at least two of them
    assert third["duration_s"] > first["duration_s"] + invocations[1]["duration_s"] - 0.01
    assert invocations[0]["started"] < invocations[1]["started"] < invocations[2]["started"]
    assert f"time: {third['duration_s']:.1f} s over 3 invocations" in idle.stdout + idle.stderr
