"""The runner around the lifecycle: interruption, resume, exit statuses, evaluation modes, bounds, observers."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from agentcompass import hookimpl
from agentcompass.runner import Runner
from agentcompass.runtime import RunRequest
from agentcompass.runtime.records import TaskEvent

from tests.helpers.cli_processes import run_cli_subprocess, start_cli
from tests.helpers.testing_plugin import CountingProvider


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def wait_for_lines(path: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(read_jsonl(path)) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {n} lines")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_keeps_finished_results_closes_environments_and_resume_finishes(tmp_path, sig):
    run_dir, work = tmp_path / "run", tmp_path / "work"
    work.mkdir()
    args = ["run", "scripted", "none", "mock", "-b", "n=8", "-b", "sleep=0.6", "-c", "2", "-o", str(run_dir),
            "--env-arg", f"root={work}"]
    proc = start_cli(*args)
    wait_for_lines(run_dir / "results.jsonl", 2)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "--resume" in stderr
    done = read_jsonl(run_dir / "results.jsonl")
    assert 2 <= len(done) < 8
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert summary["n_unfinished"] == 8 - len(done) and "CANCELLED" not in summary["status_counts"]
    cancelled = [a for a in read_jsonl(run_dir / "attempts.jsonl") if a["status"] == "CANCELLED"]
    assert cancelled, "in-flight tasks are recorded as cancelled attempts"
    assert list(work.iterdir()) == [], "every working directory was removed"

    # A torn last line (the process died mid-write) must not break or duplicate anything.
    with open(run_dir / "results.jsonl", "a") as f:
        f.write('{"task_id": "t7", "status": "COMPL')
    resumed = run_cli_subprocess("run", "--resume", str(run_dir), "-c", "4", "--json")
    assert resumed.returncode == 0, resumed.stderr
    final = read_jsonl(run_dir / "results.jsonl")
    assert sorted(r["task_id"] for r in final) == [f"t{i}" for i in range(8)]  # each exactly once
    assert {r["task_id"] for r in done} <= {r["task_id"] for r in final}
    summary = json.loads(resumed.stdout)
    assert summary["status_counts"] == {"COMPLETED": 8} and summary["interrupted"] is False
    # Attempt numbers continue after the cancelled attempts.
    for a in cancelled:
        assert next(r for r in final if r["task_id"] == a["task_id"])["attempt"] == a["attempt"] + 1
    assert len(json.loads((run_dir / "run.json").read_text())["resumed_at"]) == 1


def test_resume_of_a_finished_run_runs_nothing(host, tmp_path):
    first = run_cli_subprocess("run", "scripted", "none", "mock", "-o", str(tmp_path / "r"))
    assert first.returncode == 0, first.stderr
    again = run_cli_subprocess("run", "--resume", str(tmp_path / "r"), "--json")
    assert again.returncode == 0
    assert len(read_jsonl(tmp_path / "r" / "results.jsonl")) == 4


def test_exit_status_is_one_when_any_task_errored(tmp_path):
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "faults=t1:run=raise",
                              "-o", str(tmp_path / "r"))
    assert proc.returncode == 1
    assert "RUN_ERROR" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.parametrize("mode", ["none", "reuse", "fresh"])
async def test_evaluation_modes(host, tmp_path, mode):
    req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"mode": mode})
    outcome = await Runner(host, req, run_dir=tmp_path / "r").run()
    # even tasks score 1, odd 0; the benchmark asserts what each mode must (not) see.
    assert outcome.summary.status_counts == {"COMPLETED": 4}
    assert outcome.summary.metrics.overall["score"].mean == 0.5
    assert outcome.summary.metrics.by_category["even"].metrics["score"].mean == 1.0
    assert (tmp_path / "r" / "artifacts" / "t0" / "attempt-1" / "answer.txt").read_text() == "TASK T0"


async def test_max_environments_bounds_live_environments(host, tmp_path):
    CountingProvider.instances.clear()
    req = RunRequest(benchmark="scripted", harness="none", model="mock", environment="counting", benchmark_args={"n": "8", "sleep": "0.1"}).with_options(concurrency=8, max_environments=2)
    outcome = await Runner(host, req, run_dir=tmp_path / "r").run()
    assert outcome.summary.status_counts == {"COMPLETED": 8}
    provider = CountingProvider.instances[-1]
    assert provider.opened == provider.closed == 8
    assert provider.peak == 2  # eight tasks in flight, never more than two live environments


async def test_without_a_bound_concurrency_decides_live_environments(host, tmp_path):
    CountingProvider.instances.clear()
    req = RunRequest(benchmark="scripted", harness="none", model="mock", environment="counting", benchmark_args={"n": "8", "sleep": "0.1"}).with_options(concurrency=4)
    await Runner(host, req, run_dir=tmp_path / "r").run()
    assert CountingProvider.instances[-1].peak == 4


async def test_observers_see_every_transition_and_a_broken_observer_changes_nothing(host, tmp_path):
    events: list[TaskEvent | dict] = []

    class Recorder:
        @hookimpl
        def agentcompass_run_started(self, run_id, request, run_dir):
            events.append({"event": "run.started", "run_id": run_id})

        @hookimpl
        def agentcompass_task_event(self, event):
            events.append(event)

        @hookimpl
        def agentcompass_run_finished(self, run_id, summary):
            events.append({"event": "run.finished", "summary": summary})

    class Broken:
        @hookimpl
        def agentcompass_task_event(self, event):
            raise RuntimeError("observer bug")

    host.add_plugin(Recorder(), "recorder")
    host.add_plugin(Broken(), "broken")
    try:
        req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"n": "2"})
        outcome = await Runner(host, req, run_dir=tmp_path / "r").run()
    finally:
        host.remove_plugin("recorder")
        host.remove_plugin("broken")
    assert outcome.summary.status_counts == {"COMPLETED": 2}
    task_events = [e for e in events if isinstance(e, TaskEvent)]
    phases = [e.phase for e in task_events if e.event == "task.phase" and e.task_id == "t0"]
    assert phases == ["PREPARING", "RUNNING", "COLLECTING", "EVALUATING", "FINISHED"]
    assert events[0]["event"] == "run.started" and events[-1]["event"] == "run.finished"
    assert events[-1]["summary"] == outcome.summary
    finished = [e for e in task_events if e.event == "task.finished"]
    assert sorted(e.task_id for e in finished) == ["t0", "t1"] and all(e.status == "COMPLETED" for e in finished)
    logs = (tmp_path / "r" / "logs.jsonl").read_text()
    assert "plugin.observer_failed" in logs and "observer bug" in logs


async def test_observers_are_called_through_pluggy_ordering_and_wrappers_hold(host, tmp_path):
    order: list[str] = []

    class Plain:
        @hookimpl
        def agentcompass_run_finished(self, run_id, summary):
            order.append("plain")

    class First:
        @hookimpl(tryfirst=True)
        def agentcompass_run_finished(self, run_id, summary):
            order.append("first")

    class Around:
        @hookimpl(wrapper=True)
        def agentcompass_run_finished(self, run_id, summary):
            order.append("before")
            result = yield
            order.append("after")
            return result

    # Registered in the order that would put "first" last if markers were ignored.
    for plugin, name in ((Plain(), "plain"), (First(), "first"), (Around(), "around")):
        assert host.add_plugin(plugin, name).error is None
    try:
        req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"n": "1"})
        await Runner(host, req, run_dir=tmp_path / "r").run()
    finally:
        for name in ("plain", "first", "around"):
            host.remove_plugin(name)
    assert order == ["before", "first", "plain", "after"]


async def test_model_calls_are_metered_into_trajectory_and_summary(host, tmp_path):
    req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"n": "3", "calls": "3"})
    outcome = await Runner(host, req, run_dir=tmp_path / "r").run()
    calls = read_jsonl(tmp_path / "r" / "trajectories.jsonl")
    assert len(calls) == 9 and {c["via"] for c in calls} == {"client"}
    assert outcome.summary.usage["agent"].calls == 9
    final = read_jsonl(tmp_path / "r" / "results.jsonl")
    assert all(r["usage"]["models"]["agent"]["calls"] == 3 for r in final)


def test_limit_and_task_ids(tmp_path):
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "n=10", "--limit", "3", "-o",
                              str(tmp_path / "a"), "--json")
    assert json.loads(proc.stdout)["n_tasks"] == 3
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "n=10", "-t", "t7", "-t", "t2", "-o",
                              str(tmp_path / "b"), "--json")
    assert sorted(r["task_id"] for r in read_jsonl(tmp_path / "b" / "results.jsonl")) == ["t2", "t7"]


def test_logs_are_structured_json_with_stable_keys(tmp_path):
    run_cli_subprocess("run", "scripted", "none", "mock", "-o", str(tmp_path / "r"))
    events = read_jsonl(tmp_path / "r" / "logs.jsonl")
    assert {e["event"] for e in events} >= {"run.started", "task.phase", "task.finished", "run.finished"}
    assert all({"event", "level", "timestamp", "run_id"} <= set(e) for e in events)
