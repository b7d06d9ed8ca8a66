"""The stall watchdog (``--stall-timeout``): a hung attempt is stopped as an infrastructure error and retried; one
that shows signs of life is left alone."""

from __future__ import annotations

import datetime as dt
import json
import time

from agentcompass.cli.progress import Progress
from agentcompass.runtime.records import LiveFigures
from agentcompass.runtime.types import RunRequest, Schedule
from agentcompass.supervision import STALL_DEFAULTS, stall_timeouts
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.cli_processes import read_jsonl, run_cli_subprocess


def _at(event: dict) -> float:
    return dt.datetime.fromisoformat(event["timestamp"]).timestamp()


def test_an_attempt_that_hangs_is_stopped_at_the_stall_timeout_and_retried(tmp_path):
    run_dir, work = tmp_path / "run", tmp_path / "work"
    work.mkdir()
    done = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "n=1", "-b", "faults=t0:run=hang@1",
                              "--stall-timeout", "1.5", "--retries", "1", "-o", str(run_dir), "--env-arg",
                              f"root={work}")
    assert done.returncode == 0, done.stderr
    (stalled,) = read_jsonl(run_dir / "attempts.jsonl")
    assert (stalled["status"], stalled["attempt"], stalled["error_phase"]) == ("RUN_ERROR", 1, "run")
    assert stalled["error"].startswith("stalled: no sign of life for 1.5s in the run phase")
    assert "the last: entered the run phase" in stalled["error"]
    (result,) = read_jsonl(run_dir / "results.jsonl")
    assert (result["status"], result["attempt"]) == ("COMPLETED", 2)
    logs = read_jsonl(run_dir / "logs.jsonl")
    entered = next(e for e in logs if e["event"] == "task.phase" and e["phase"] == "RUNNING" and e["attempt"] == 1)
    (stop,) = [e for e in logs if e["event"] == "task.stalled"]
    assert 1.5 <= _at(stop) - _at(entered) < 2.5  # at S seconds (the watchdog looks a few times a second)
    assert [p for p in work.rglob("*") if p.is_dir()] == []  # its environment was closed


def test_an_attempt_that_prints_every_half_second_is_not_stopped(tmp_path):
    run_dir = tmp_path / "run"
    started = time.monotonic()
    done = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "n=1", "-b", "faults=t0:run=chatty",
                              "--stall-timeout", "1.5", "-o", str(run_dir))
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started > 4  # quiet for 4 s but for its output: longer than the stall timeout
    assert read_jsonl(run_dir / "attempts.jsonl") == []
    (result,) = read_jsonl(run_dir / "results.jsonl")
    assert result["status"] == "COMPLETED"


def test_a_stalled_attempt_without_retries_is_a_run_error_naming_its_phase(tmp_path):
    run_dir = tmp_path / "run"
    done = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "n=1", "-b", "faults=t0:prepare=hang",
                              "--stall-timeout", "1", "-o", str(run_dir))
    assert done.returncode == 1, done.stderr
    (result,) = read_jsonl(run_dir / "results.jsonl")
    assert (result["status"], result["error_phase"]) == ("RUN_ERROR", "prepare")
    assert "no sign of life for 1s in the prepare phase" in result["error"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status_counts"] == {"RUN_ERROR": 1}


def test_a_resume_may_change_the_stall_timeout(tmp_path):
    run_dir = tmp_path / "run"
    first = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "n=2", "-b", "faults=t1:run=hang@1",
                               "--stall-timeout", "1", "-o", str(run_dir))
    assert first.returncode == 1, first.stderr  # t1 stalled, no retries
    resumed = run_cli_subprocess("run", "--resume", str(run_dir), "--stall-timeout", "30")
    assert resumed.returncode == 1 and "--stall-timeout" not in resumed.stderr, resumed.stderr
    assert json.loads((run_dir / "run.json").read_text())["request"]["stall_timeout"] == 30


def test_a_stall_timeout_that_is_not_positive_is_a_one_line_error(tmp_path):
    done = run_cli_subprocess("run", "scripted", "none", "mock", "--stall-timeout", "0", "-o", str(tmp_path / "r"))
    assert done.returncode == 2
    assert "--stall-timeout must be a positive number of seconds, got 0" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "r").exists()


@given(st.one_of(st.none(), st.floats(min_value=0.001, max_value=1e6)))
def test_the_stall_timeout_is_the_default_of_each_phase_or_the_one_given(seconds):
    limits = stall_timeouts(RunRequest(benchmark="b", harness="h", model="m", schedule=Schedule(stall_timeout=seconds)))
    assert set(limits) == {"prepare", "run", "collect", "evaluate"}
    assert limits == (dict(STALL_DEFAULTS) if seconds is None else dict.fromkeys(limits, seconds))


def test_the_status_line_counts_stalled_attempts():
    progress = Progress(enabled=False)
    progress.start(4, 0, figures=lambda: LiveFigures(in_flight=1, stalled=2))
    assert "  stalled 2  " in progress.status_line()
    progress.start(4, 0, figures=lambda: LiveFigures(in_flight=1))
    assert "stalled" not in progress.status_line()


def test_an_open_model_call_keeps_an_attempt_alive_past_the_stall_timeout():
    """Unit level: the watchdog leaves an attempt whose model call is under way (``--request-timeout`` bounds it)."""
    import asyncio
    from types import SimpleNamespace

    from agentcompass.runtime.executor import AttemptSpec
    from agentcompass.runtime.types import EnvironmentSpec, TaskSpec
    from agentcompass.supervision import LiveAttempt, Supervisor

    async def check() -> tuple[bool, bool]:
        spec = AttemptSpec(run_id="r", task=TaskSpec(task_id="t"), attempt=1, environment=EnvironmentSpec(),
                           timeouts={}, request=RunRequest(benchmark="b", harness="h", model="m"), gateway_env={})
        meter = SimpleNamespace(open_calls=["a call"])
        supervisor = Supervisor({"run": 1.0}, {spec.key: meter})  # type: ignore[dict-item]
        live = supervisor.live[spec.key] = LiveAttempt(spec, phase="RUNNING")
        live.task = asyncio.create_task(asyncio.sleep(60))
        supervisor.check_stalls(live.last_sign + 5)
        kept = live.stop_kind is None
        meter.open_calls.clear()
        supervisor.check_stalls(live.last_sign + 5)
        stopped = live.stop_kind == "stalled" and supervisor.stalled == 1
        live.task.cancel()
        return kept, stopped

    assert asyncio.run(check()) == (True, True)
