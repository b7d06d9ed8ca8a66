"""The per-task state machine: transitions, fault injection in every phase, environments always closed."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from agentcompass.lifecycle import TRANSITIONS, AttemptMachine, IllegalTransition, Phase
from agentcompass.runner import Runner
from agentcompass.runtime import RunRequest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples
from tests.helpers.testing_plugin import CountingProvider

# Short enough to keep the test quick, long enough that a loaded machine does not time out healthy phases.
FAST_TIMEOUTS = {"prepare": 1.0, "run": 1.0, "collect": 1.0, "evaluate": 1.0, "environment": 10.0}


def expected_status(faults: dict[str, str]) -> str:
    """What the lifecycle must make of a task whose phases misbehave as ``faults`` says."""
    if faults.get("prepare"):
        return "PREPARE_ERROR"
    if faults.get("run"):
        return "RUN_ERROR"
    if faults.get("collect") in ("raise", "hang", "bad", "infra"):
        return "RUN_ERROR"
    if faults.get("evaluate") in ("raise", "hang", "bad", "infra"):
        return "EVAL_ERROR"
    return "COMPLETED"


def expected_retryable(faults: dict[str, str]) -> bool:
    """Infrastructure failures and timeouts are retried; a plugin's own bug is not."""
    for phase in ("prepare", "run", "collect", "evaluate"):
        behaviour = faults.get(phase)
        if behaviour is None:
            continue
        if phase == "run" and behaviour == "status":
            return False
        if phase in ("collect", "evaluate") and expected_status(faults) != {"collect": "RUN_ERROR",
                                                                         "evaluate": "EVAL_ERROR"}[phase]:
            continue  # an earlier error stands; this phase's fault changes nothing
        return behaviour in ("infra", "hang")
    return False


def test_every_legal_path_ends_in_finished():
    for path in ([Phase.PREPARING, Phase.RUNNING, Phase.COLLECTING, Phase.EVALUATING, Phase.FINISHED],
                 [Phase.PREPARING, Phase.FINISHED], [Phase.FINISHED]):
        seen: list[tuple[Phase, Phase]] = []
        machine = AttemptMachine("t", 1, lambda prev, new, seen=seen: seen.append((prev, new)))
        for phase in path:
            machine.advance(phase)
        assert machine.phase is Phase.FINISHED
        assert [new for _, new in seen] == path


@given(st.lists(st.sampled_from(list(Phase)), min_size=1, max_size=8))
def test_illegal_transitions_raise_and_change_nothing(steps):
    machine = AttemptMachine("t", 1)
    for step in steps:
        before = machine.phase
        if step in TRANSITIONS[before]:
            machine.advance(step)
            assert machine.phase is step
        else:
            with pytest.raises(IllegalTransition):
                machine.advance(step)
            assert machine.phase is before


PHASE_FAULTS = {
    "prepare": st.sampled_from([None, "raise", "infra", "hang", "bad"]),
    "run": st.sampled_from([None, "raise", "infra", "hang", "bad", "status"]),
    "collect": st.sampled_from([None, "raise", "hang", "bad"]),
    "evaluate": st.sampled_from([None, "raise", "hang", "bad"]),
}


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    faults=st.lists(st.fixed_dictionaries(PHASE_FAULTS), min_size=1, max_size=4),
    mode=st.sampled_from(["none", "reuse", "fresh"]),
    retries=st.integers(0, 1),
)
@pytest.mark.slow  # every fault at every phase: a long matrix; CI runs it (--all-tests)
def test_fault_injection_gives_the_right_status_and_closes_every_environment(host, faults, mode, retries):
    spec = ";".join(f"t{i}:{phase}={b}" for i, f in enumerate(faults) for phase, b in f.items() if b)
    req = RunRequest(benchmark="scripted", harness="none", model="mock", environment="counting", benchmark_args={"n": str(len(faults)), "mode": mode, "faults": spec}).with_options(phase_timeouts=FAST_TIMEOUTS, retries=retries, concurrency=3)
    with tempfile.TemporaryDirectory() as tmp:
        outcome = asyncio.run(Runner(host, req, run_dir=Path(tmp) / "run").run())
        provider = CountingProvider.instances[-1]
        lines = [json.loads(x) for x in (Path(tmp) / "run" / "results.jsonl").read_text().splitlines()]
        attempts = [json.loads(x) for x in (Path(tmp) / "run" / "attempts.jsonl").read_text().splitlines()] \
            if (Path(tmp) / "run" / "attempts.jsonl").exists() else []
    assert provider.opened == provider.closed and not provider.open_sessions
    assert sorted(r["task_id"] for r in lines) == [f"t{i}" for i in range(len(faults))]  # one final each
    for i, f in enumerate(faults):
        final = next(r for r in lines if r["task_id"] == f"t{i}")
        assert final["status"] == expected_status(f), (f, final)
        if final["status"] != "COMPLETED":
            assert final["error"], final
            assert final["metrics"] == {}, final  # an errored task is never scored
        retried = [a for a in attempts if a["task_id"] == f"t{i}"]
        assert len(retried) == (retries if expected_retryable(f) else 0), (f, retried)
        assert final["attempt"] == len(retried) + 1
    assert outcome.summary.n_tasks == len(faults)
    assert sum(outcome.summary.status_counts.values()) == len(faults)


async def test_a_scoring_crash_never_hides_an_execution_error(host, tmp_path):
    req = RunRequest(benchmark="scripted", harness="none", model="mock",
                     benchmark_args={"n": "1", "faults": "t0:run=raise;t0:evaluate=raise"})
    await Runner(host, req, run_dir=tmp_path / "r").run()
    (final,) = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert final["status"] == "RUN_ERROR"
    assert "run blew up on purpose" in final["error"]
    assert final["error_phase"] == "run"


async def test_prepare_task_is_rerun_on_retry_and_each_attempt_recorded(host, tmp_path):
    req = RunRequest(benchmark="scripted", harness="none", model="mock", environment="counting", benchmark_args={"n": "1", "faults": "t0:run=infra@2"}).with_options(retries=3)
    outcome = await Runner(host, req, run_dir=tmp_path / "r").run()
    assert outcome.summary.status_counts == {"COMPLETED": 1}
    attempts = [json.loads(x) for x in (tmp_path / "r" / "attempts.jsonl").read_text().splitlines()]
    assert [(a["attempt"], a["status"]) for a in attempts] == [(1, "RUN_ERROR"), (2, "RUN_ERROR")]
    (final,) = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert final["attempt"] == 3
    provider = CountingProvider.instances[-1]
    assert provider.opened == provider.closed == 3


async def test_environment_start_failures_are_retried(host, tmp_path):
    req = RunRequest(benchmark="scripted", harness="none", model="mock", environment="counting", environment_args={"fail_opens": "1"}, benchmark_args={"n": "1"}).with_options(retries=1)
    outcome = await Runner(host, req, run_dir=tmp_path / "r").run()
    assert outcome.summary.status_counts == {"COMPLETED": 1}
    (attempt,) = [json.loads(x) for x in (tmp_path / "r" / "attempts.jsonl").read_text().splitlines()]
    assert attempt["status"] == "PREPARE_ERROR" and "engine hiccup" in attempt["error"]


async def test_a_plugin_bug_is_not_retried(host, tmp_path):
    req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"n": "1", "faults": "t0:run=raise"}).with_options(retries=3)
    await Runner(host, req, run_dir=tmp_path / "r").run()
    assert not (tmp_path / "r" / "attempts.jsonl").exists()


async def test_run_timeout_really_times_out(host, tmp_path):
    req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"n": "2", "sleep": "3600"}).with_options(timeout=0.5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    outcome = await Runner(host, req, run_dir=tmp_path / "r").run()
    assert loop.time() - started < 10
    assert outcome.summary.status_counts == {"RUN_ERROR": 2}
    (first, _) = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert "timed out after 0.5s" in first["error"]
