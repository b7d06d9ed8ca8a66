"""Multi-step Harbor tasks (``[[steps]]``): each step's own instruction, agent run and verifier, in one
environment, in order; the task's reward as Harbor computes it (the steps' mean, or the final step's), each
step's result kept; ``min_reward`` stopping the steps after one; and the combination checked against Harbor's own
code on the same step results."""

from __future__ import annotations

import json
import os
import random
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.testing import run_benchmark
from agentcompass_harbor.benchmark import HarborBenchmark
from agentcompass_harbor.steps import combine, stop_reason

from tests.harbor.taskdirs import REWARD_BY_EXIT

HARBOR_VENV = Path.home() / ".cache" / "agentcompass-tests" / "harbor-0.25.0-venv"
DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())


def two_steps(root: Path, name: str = "two-steps", toml: str = "", step_one_tests: bool = True) -> Path:
    """Step ``one`` writes /app/a.txt (its own tests check it); step ``two`` writes /app/b.txt (the task's
    shared tests check both files)."""
    task = root / name
    write(task / "task.toml", f'version = "1.0"\n{toml}\n[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n')
    write(task / "environment" / "Dockerfile", DOCKERFILE)
    write(task / "steps" / "one" / "instruction.md", "Write `a` to /app/a.txt.\n")
    write(task / "steps" / "one" / "solution" / "solve.sh", "#!/bin/bash\necho a > /app/a.txt\n")
    if step_one_tests:
        write(task / "steps" / "one" / "tests" / "test.sh", "#!/bin/bash\ngrep -qx a /app/a.txt\n" + REWARD_BY_EXIT)
    else:
        write(task / "steps" / "one" / "tests" / "test.sh", "#!/bin/bash\necho 'no reward here'\n")
    write(task / "steps" / "two" / "instruction.md", "Now write `b` to /app/b.txt.\n")
    write(task / "steps" / "two" / "solution" / "solve.sh", "#!/bin/bash\necho b > /app/b.txt\n")
    write(task / "tests" / "test.sh", "#!/bin/bash\ngrep -qx a /app/a.txt && grep -qx b /app/b.txt\n" + REWARD_BY_EXIT)
    return root


def only_step_one(bench: HarborBenchmark, seen: list[tuple[int, str]]):  # type: ignore[no-untyped-def]
    """A harness that does what step one asks and nothing for later steps, recording each instruction."""

    async def run(task, prepared, req, plan, env) -> RunResult:  # type: ignore[no-untyped-def]
        step = int(prepared.metadata["step"])
        seen.append((step, bench.instruction(task, prepared)))
        if step == 0:
            await env.exec(["sh", "-c", "echo a > a.txt"])
        return RunResult(task_id=task.task_id, status=TaskStatus.COMPLETED)

    return run


async def test_the_oracle_solves_each_step_in_one_environment(tmp_path: Path) -> None:
    run = await run_benchmark("harbor", "oracle", benchmark_args={"path": str(two_steps(tmp_path / "t"))},
                              run_dir=tmp_path / "run")
    result = run.result("two-steps")
    assert result.status is TaskStatus.COMPLETED, result.error
    assert result.metrics == {"reward": 1.0}
    assert [(s["name"], s["rewards"]) for s in result.artifacts["steps"]] == \
        [("one", {"reward": 1.0}), ("two", {"reward": 1.0})]
    kept = run.run_dir / "artifacts" / "two-steps" / "attempt-1"
    assert (kept / "steps" / "one" / "verifier" / "reward.txt").read_text().strip() == "1"
    assert (kept / "agent" / "oracle-two.txt").exists()


async def test_the_reward_is_the_steps_mean_and_each_step_gets_its_instruction(tmp_path: Path) -> None:
    bench = HarborBenchmark(path=str(two_steps(tmp_path / "t")))
    seen: list[tuple[int, str]] = []
    run = await run_benchmark(bench, only_step_one(bench, seen), run_dir=tmp_path / "run")
    result = run.result("two-steps")
    assert [step for step, _ in seen] == [0, 1]
    assert "`a`" in seen[0][1] and "`b`" in seen[1][1]
    assert [s["rewards"]["reward"] for s in result.artifacts["steps"]] == [1.0, 0.0]
    assert result.metrics == {"reward": 0.5}  # Harbor's mean over the steps


async def test_the_final_strategy_takes_the_last_step(tmp_path: Path) -> None:
    bench = HarborBenchmark(path=str(two_steps(tmp_path / "t", toml='multi_step_reward_strategy = "final"')))
    run = await run_benchmark(bench, only_step_one(bench, []), run_dir=tmp_path / "run")
    assert run.result("two-steps").metrics == {"reward": 0.0}


async def test_min_reward_stops_the_steps_after(tmp_path: Path) -> None:
    root = two_steps(tmp_path / "t")
    toml = root / "two-steps" / "task.toml"
    toml.write_text(toml.read_text().replace('name = "one"\n', 'name = "one"\nmin_reward = 1.0\n'))
    bench = HarborBenchmark(path=str(root))
    seen: list[tuple[int, str]] = []

    async def nothing(task, prepared, req, plan, env) -> RunResult:  # type: ignore[no-untyped-def]
        seen.append((int(prepared.metadata["step"]), ""))
        return RunResult(task_id=task.task_id, status=TaskStatus.COMPLETED)

    run = await run_benchmark(bench, nothing, run_dir=tmp_path / "run")
    result = run.result("two-steps")
    assert [step for step, _ in seen] == [0]  # step two never ran
    assert result.metrics == {"reward": 0.0}
    assert "below min_reward 1.0" in result.artifacts["steps"][0]["stopped"]


async def test_a_step_whose_verifier_fails_ends_the_steps_without_a_reward(tmp_path: Path) -> None:
    run = await run_benchmark("harbor", "oracle",
                              benchmark_args={"path": str(two_steps(tmp_path / "t", step_one_tests=False))},
                              run_dir=tmp_path / "run")
    result = run.result("two-steps")
    assert result.status is TaskStatus.EVAL_ERROR
    assert "no step has a reward" in result.error and "no reward file" in result.error


# -- Harbor's own combination, on the same step results -------------------------------------------------------


COMPARE = """
import json, sys, types
from harbor.models.task.config import MultiStepRewardStrategy
from harbor.models.verifier.result import VerifierResult
from harbor.trial.trial import Trial
from harbor.trial.multi_step import MultiStepTrial

out = []
for case in json.loads(sys.stdin.read()):
    steps = [types.SimpleNamespace(verifier_result=None if r is None else VerifierResult(rewards=r))
             for r in case["steps"]]
    strategy = MultiStepRewardStrategy(case["strategy"])
    me = types.SimpleNamespace(result=types.SimpleNamespace(step_results=steps),
                               task=types.SimpleNamespace(config=types.SimpleNamespace(
                                   multi_step_reward_strategy=strategy)))
    me._aggregate_step_rewards = lambda me=me: Trial._aggregate_step_rewards(me)
    chosen = Trial._select_multi_step_reward(me)
    gate = None if case["min_reward"] is None else \
        MultiStepTrial._min_reward_failure(case["steps"][0], case["min_reward"])
    out.append({"rewards": None if chosen is None else chosen.rewards, "stops": gate is not None})
print(json.dumps(out))
"""


def _cases(n: int) -> list[dict[str, Any]]:
    rng = random.Random(35)
    cases = []
    for _ in range(n):
        steps = []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.2:
                steps.append(None)
            else:
                keys = rng.sample(["reward", "accuracy", "speed"], rng.randint(1, 3))
                steps.append({k: rng.choice([0.0, 0.25, 0.5, 1.0]) for k in keys})
        min_reward: Any = rng.choice([None, 0.5, 1.0, {"accuracy": 0.5}, {"reward": 0.25, "speed": 1.0}])
        cases.append({"steps": steps, "strategy": rng.choice(["mean", "final"]), "min_reward": min_reward})
    return cases


@pytest.mark.slow
def test_the_steps_combine_as_harbors_trial_combines_them() -> None:
    python = HARBOR_VENV / "bin" / "python"
    if not python.exists():
        if os.environ.get("CI"):
            pytest.fail(f"no harbor test environment at {HARBOR_VENV} (tests/export/test_atif_export.py makes it)")
        pytest.skip(f"no harbor test environment at {HARBOR_VENV}")
    cases = _cases(300)
    done = subprocess.run([str(python), "-c", COMPARE], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for case, harbor in zip(cases, json.loads(done.stdout), strict=True):
        records = [{"name": f"s{i}", **({"rewards": r} if r is not None else {"error": "boom"})}
                   for i, r in enumerate(case["steps"])]
        try:
            ours: dict[str, float] | None = combine(records, case["strategy"])
        except RuntimeError:
            ours = None
        if harbor["rewards"] is not None and ours is not None:
            assert ours == pytest.approx(harbor["rewards"]), case
        else:
            assert ours is None and not harbor["rewards"], case
        if case["steps"][0] is not None:
            assert (stop_reason(records[0], case["min_reward"]) is not None) == harbor["stops"], case


async def test_a_steps_workdir_and_setup_are_in_place_before_its_agent(tmp_path: Path) -> None:
    root = two_steps(tmp_path / "t")
    task = root / "two-steps"
    write(task / "steps" / "two" / "workdir" / "data.txt", "seeded\n")
    write(task / "steps" / "two" / "workdir" / "setup.sh", "echo ran > /app/setup.txt\n")
    write(task / "steps" / "two" / "tests" / "test.sh", """\
        #!/bin/bash
        grep -qx seeded /app/data.txt && grep -qx ran /app/setup.txt && grep -qx b /app/b.txt
        """ + REWARD_BY_EXIT)
    run = await run_benchmark("harbor", "oracle", benchmark_args={"path": str(root)}, run_dir=tmp_path / "run")
    result = run.result("two-steps")
    assert [s["rewards"]["reward"] for s in result.artifacts["steps"]] == [1.0, 1.0], result.artifacts["steps"]


@pytest.mark.docker
async def test_two_steps_under_docker(tmp_path: Path) -> None:
    from tests.helpers.docker_engine import require_engine

    require_engine()
    run = await run_benchmark("harbor", "oracle", environment="docker",
                              benchmark_args={"path": str(two_steps(tmp_path / "t"))}, run_dir=tmp_path / "run")
    result = run.result("two-steps")
    assert result.metrics == {"reward": 1.0}, result.error
    assert [s["name"] for s in result.artifacts["steps"]] == ["one", "two"]


# -- a step whose agent fails: verified all the same, as Harbor's MultiStepTrial does --------------------------


async def test_a_step_whose_agent_times_out_is_still_verified_and_the_steps_go_on(tmp_path: Path) -> None:
    """Harbor verifies a step after its agent's AgentTimeoutError and goes on when the step has a reward; the
    attempt is a RUN_ERROR here (as a single-step task's agent timeout is), with Harbor's reward kept beside."""
    root = two_steps(tmp_path / "t")
    task = root / "two-steps"
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace('name = "one"\n', 'name = "one"\n[steps.agent]\ntimeout_sec = 1.0\n'))
    write(task / "steps" / "one" / "solution" / "solve.sh", "#!/bin/bash\necho a > /app/a.txt\nsleep 30\n")
    run = await run_benchmark("harbor", "oracle", benchmark_args={"path": str(root)}, run_dir=tmp_path / "run")
    result = run.result("two-steps")
    assert result.status is TaskStatus.RUN_ERROR
    assert "timed out after 1 s" in result.error and "step 'one'" in result.error
    assert result.metrics == {}
    one, two = result.artifacts["steps"]
    assert one["rewards"] == {"reward": 1.0} and "timed out" in one["agent_error"]
    assert two["rewards"] == {"reward": 1.0} and "agent_error" not in two
    assert result.artifacts["harbor_reward"] == {"reward": 1.0}


async def test_a_step_whose_harness_raises_is_verified_and_its_failure_stands(tmp_path: Path) -> None:
    bench = HarborBenchmark(path=str(two_steps(tmp_path / "t")))
    seen: list[int] = []

    async def raises_after_step_one(task, prepared, req, plan, env) -> RunResult:  # type: ignore[no-untyped-def]
        step = int(prepared.metadata["step"])
        seen.append(step)
        if step == 0:
            await env.exec(["sh", "-c", "echo a > a.txt"])
            raise ValueError("the agent crashed")
        return RunResult(task_id=task.task_id, status=TaskStatus.COMPLETED)

    run = await run_benchmark(bench, raises_after_step_one, run_dir=tmp_path / "run")
    result = run.result("two-steps")
    assert seen == [0, 1]
    assert result.status is TaskStatus.RUN_ERROR and "the agent crashed" in result.error
    assert [(s["rewards"], "agent_error" in s) for s in result.artifacts["steps"]] == \
        [({"reward": 1.0}, True), ({"reward": 0.0}, False)]
    assert result.artifacts["harbor_reward"] == {"reward": 0.5}


async def test_a_failed_agent_whose_step_has_no_reward_stops_the_steps(tmp_path: Path) -> None:
    bench = HarborBenchmark(path=str(two_steps(tmp_path / "t", step_one_tests=False)))
    seen: list[int] = []

    async def fails(task, prepared, req, plan, env) -> RunResult:  # type: ignore[no-untyped-def]
        seen.append(int(prepared.metadata["step"]))
        return RunResult(task_id=task.task_id, status=TaskStatus.RUN_ERROR, error="the agent gave up")

    run = await run_benchmark(bench, fails, run_dir=tmp_path / "run")
    result = run.result("two-steps")
    assert seen == [0]
    assert result.status is TaskStatus.RUN_ERROR and result.error == "the agent gave up"
    assert result.artifacts["steps"][0]["stopped"] == "its verifier failed"
    assert result.artifacts["harbor_reward"] is None
