"""``agentcompass ctl``: steering a real run in another process over its control socket."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from agentcompass.control.client import send
from agentcompass.control.endpoint import peer_allowed, socket_address
from agentcompass.errors import UsageError
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.cli_processes import read_jsonl, run_cli_subprocess, start_cli, wait_for

NOBODY = 65534


def start_run(run_dir: Path, *args: str) -> subprocess.Popen[str]:
    return start_cli("run", "scripted", "none", "mock", "-o", str(run_dir), "--task-lines", *args)


def status(run_dir: Path) -> dict:
    return send(run_dir, {"action": "status"})["status"]


def serving(run_dir: Path) -> None:
    wait_for(lambda: (run_dir / "control.sock").exists(), what="the control socket")


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    return proc.communicate(timeout=120)


def records(path: Path) -> list[dict]:
    """The complete lines of a JSON-lines file a live run appends to (a line being written is left out)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().split("\n")[:-1]]


def control_actions(run_dir: Path) -> list[dict]:
    return [e for e in read_jsonl(run_dir / "logs.jsonl") if e["event"] == "control.action"]


def results(run_dir: Path) -> list[dict]:
    return records(run_dir / "results.jsonl")


def test_pause_stops_new_starts_and_resume_continues(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_run(run_dir, "-b", "n=6", "-b", "sleep=1", "-c", "2")
    serving(run_dir)
    reply = send(run_dir, {"action": "pause"})
    assert reply["message"].startswith("paused")
    wait_for(lambda: not status(run_dir)["running"], what="the running attempts to finish")
    before = status(run_dir)
    assert before["state"] == "paused" and before["n_waiting"] >= 2, before
    time.sleep(2.5)  # longer than an attempt takes: any attempt started after the pause would show
    after = status(run_dir)
    assert (after["finished"], after["n_waiting"], after["running"]) == (before["finished"], before["n_waiting"], [])
    assert len(results(run_dir)) == before["finished"]
    done = run_cli_subprocess("ctl", str(run_dir), "resume")
    assert done.returncode == 0 and done.stdout.strip() == "resumed", done.stderr
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    assert len(results(run_dir)) == 6
    assert "ctl pause (uid" in stderr and "ctl resume (uid" in stderr, stderr
    actions = control_actions(run_dir)
    assert [a["action"] for a in actions] == ["pause", "resume"]
    assert all(a["uid"] == os.getuid() and a["timestamp"] for a in actions)
    assert not (run_dir / "control.sock").exists() and not (run_dir / "control.lock").exists()


def test_set_concurrency_takes_effect_within_a_second(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_run(run_dir, "-b", "n=8", "-b", "sleep=4", "-c", "1")
    serving(run_dir)
    wait_for(lambda: len(status(run_dir)["running"]) == 1, what="one running attempt")
    asked = time.monotonic()
    assert send(run_dir, {"action": "set", "name": "concurrency", "value": "4"})["message"] == "concurrency 1 -> 4"
    wait_for(lambda: len(status(run_dir)["running"]) == 4, timeout=5, what="four running attempts")
    assert time.monotonic() - asked < 1.0
    send(run_dir, {"action": "drain"})
    _, stderr = finish(proc)
    assert proc.returncode == 130, stderr


def test_requeue_runs_a_finished_task_again_and_keeps_the_earlier_attempt(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_run(run_dir, "-b", "n=3", "-b", "sleep=1", "-c", "1")
    serving(run_dir)
    wait_for(lambda: any(r["task_id"] == "t0" for r in results(run_dir)), what="t0's result")
    reply = send(run_dir, {"action": "requeue", "task": "t0"})
    assert "trial 1: queued as attempt 2" in reply["message"], reply
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    t0 = [(r["attempt"], r["status"]) for r in results(run_dir) if r["task_id"] == "t0"]
    assert t0 == [(1, "COMPLETED"), (2, "COMPLETED")]  # the last line of a (task, trial) is its result
    earlier = [(a["task_id"], a["attempt"]) for a in read_jsonl(run_dir / "attempts.jsonl")]
    assert earlier == [("t0", 1)]
    assert (run_dir / "artifacts" / "t0" / "attempt-1").is_dir() and (run_dir / "artifacts" / "t0" / "attempt-2").is_dir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status_counts"] == {"COMPLETED": 3}
    assert "[3/3] t0 COMPLETED" in stderr and "[4/3]" not in stderr  # the console counts t0 once


def test_drain_ends_a_run_that_resume_finishes_with_nothing_lost_or_duplicated(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_run(run_dir, "-b", "n=6", "-b", "sleep=1", "-c", "2")
    serving(run_dir)
    wait_for(lambda: results(run_dir), what="a first result")
    assert send(run_dir, {"action": "drain"})["message"].startswith("draining")
    _, stderr = finish(proc)
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["interrupted"] is True
    drained = len(results(run_dir))
    assert 1 <= drained < 6
    assert read_jsonl(run_dir / "attempts.jsonl") == []  # nothing was cut: the running attempts finished
    resumed = run_cli_subprocess("run", "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    keys = Counter((r["task_id"], r["trial"]) for r in results(run_dir))
    assert sorted(keys) == [(f"t{i}", 1) for i in range(6)] and set(keys.values()) == {1}


def test_pause_now_cancels_the_running_attempts_and_queues_them_again(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_run(run_dir, "-b", "n=3", "-b", "sleep=30", "-c", "2")
    serving(run_dir)
    wait_for(lambda: len(status(run_dir)["running"]) == 2, what="two running attempts")
    reply = send(run_dir, {"action": "pause", "now": True})
    assert "2 running cancelled and queued again" in reply["message"], reply
    wait_for(lambda: len(records(run_dir / "attempts.jsonl")) == 2, what="two cut attempts")
    cut = read_jsonl(run_dir / "attempts.jsonl")
    assert {(a["status"], a["attempt"]) for a in cut} == {("CANCELLED", 1)}
    assert all("pause --now" in a["error"] for a in cut)
    state = status(run_dir)
    assert state["running"] == [] and state["n_waiting"] == 3
    assert {(w["task_id"], w["attempt"]) for w in state["waiting"]} == {("t0", 2), ("t1", 2), ("t2", 1)}
    send(run_dir, {"action": "cancel", "task": "t2"})
    send(run_dir, {"action": "drain"})
    _, stderr = finish(proc)
    assert proc.returncode == 130, stderr
    assert [(r["task_id"], r["status"]) for r in results(run_dir)] == [("t2", "CANCELLED")]


def test_bad_requests_get_one_line_errors(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_run(run_dir, "-b", "n=2", "-b", "sleep=30", "-c", "1")
    serving(run_dir)
    try:
        for argv, said in [(("cancel", "nope"), "no task 'nope' in this run; its tasks: t0, t1"),
                           (("set", "concurrency=0"), "set concurrency= takes a positive number"),
                           (("set", "speed=3"), "cannot set 'speed'"),
                           (("set", "concurrency"), "set takes NAME=VALUE"),
                           (("requeue", "t0", "--trial", "3"), "--trial takes 1 to 1 in this run")]:
            done = run_cli_subprocess("ctl", str(run_dir), *argv)
            assert done.returncode == 2 and said in done.stderr, (argv, done.stderr)
            assert "Traceback" not in done.stderr
    finally:
        send(run_dir, {"action": "cancel", "task": "t0"})
        send(run_dir, {"action": "cancel", "task": "t1"})
        finish(proc)
    assert proc.returncode == 1  # the tasks were cancelled
    missing = run_cli_subprocess("ctl", str(tmp_path / "nowhere"), "status")
    assert missing.returncode == 2 and "is not a run directory" in missing.stderr


def test_a_stale_socket_from_a_killed_run_is_replaced(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_run(run_dir, "-b", "n=20", "-b", "sleep=1", "-c", "1")
    serving(run_dir)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert (run_dir / "control.sock").exists()  # left behind
    with pytest.raises(UsageError, match="no run is running in"):
        status(run_dir)
    resumed = start_cli("run", "--resume", str(run_dir), "--task-lines")
    wait_for(lambda: _answers(run_dir), what="the resumed run to answer on the replaced socket")
    wait_for(lambda: any(e["event"] == "control.stale_socket" for e in records(run_dir / "logs.jsonl")),
             what="the replaced socket in logs.jsonl (flushed within a second)")
    send(run_dir, {"action": "drain"})
    _, stderr = finish(resumed)
    assert resumed.returncode == 130, stderr


def _answers(run_dir: Path) -> bool:
    try:
        return status(run_dir)["state"] == "running"
    except UsageError:
        return False


#: A raw client for a process of another user (who cannot import the project): one request, the reply or the error.
RAW_CLIENT = textwrap.dedent("""
    import json, socket, sys
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sys.argv[1])
    except OSError as exc:
        print(json.dumps({"connect_error": exc.__class__.__name__}))
        raise SystemExit
    s.sendall(b'{"action": "pause"}\\n')
    print(s.makefile().readline())
""")


def test_another_uid_is_refused(tmp_path):
    if os.getuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("switching to another uid needs root and setpriv")
    base = Path(tempfile.mkdtemp(prefix="ctl-uid-", dir="/tmp"))
    try:
        base.chmod(0o755)  # another user may reach the run directory; the socket itself is the guard
        run_dir = base / "run"
        proc = start_run(run_dir, "-b", "n=2", "-b", "sleep=30", "-c", "1")
        serving(run_dir)
        run_dir.chmod(0o755)
        address = str(socket_address(run_dir))
        as_nobody = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups",
                     "/usr/bin/python3", "-c", RAW_CLIENT, address]
        first = subprocess.run(as_nobody, capture_output=True, text=True, timeout=30)
        assert json.loads(first.stdout) == {"connect_error": "PermissionError"}, first  # the socket is 0600
        os.chmod(address, 0o666)  # were it open to all, the peer's uid still decides
        second = subprocess.run(as_nobody, capture_output=True, text=True, timeout=30)
        reply = json.loads(second.stdout)
        assert reply["ok"] is False and reply["error"].startswith(f"refused: uid {NOBODY} does not own this run")
        assert status(run_dir)["state"] == "running"  # the refused request did nothing
        send(run_dir, {"action": "cancel", "task": "t0"})
        send(run_dir, {"action": "cancel", "task": "t1"})
        finish(proc)
        refused = [e for e in read_jsonl(run_dir / "logs.jsonl") if e["event"] == "control.refused"]
        assert [e["uid"] for e in refused] == [NOBODY]
    finally:
        shutil.rmtree(base, ignore_errors=True)


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
def test_only_the_owner_uid_is_allowed(peer, owner):
    assert peer_allowed(peer, owner) is (peer == owner)
    assert peer_allowed(owner, owner)


def test_a_run_directory_too_long_for_a_socket_address_gets_a_link(tmp_path):
    run_dir = tmp_path / ("d" * 120) / "run"
    proc = start_run(run_dir, "-b", "n=2", "-b", "sleep=30", "-c", "1")
    serving(run_dir)
    assert (run_dir / "control.sock").is_symlink()
    assert status(run_dir)["state"] == "running"
    send(run_dir, {"action": "drain"})
    send(run_dir, {"action": "cancel", "task": "t0"})
    finish(proc)
    assert not (run_dir / "control.sock").exists() and not socket_address(run_dir).exists()
