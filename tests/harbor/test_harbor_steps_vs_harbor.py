"""Multi-step tasks scored as a real ``harbor run`` scores them: the same task directories through Harbor 0.25's
own CLI (``harbor run -p DIR -a oracle``, one job over all of them, on Docker through ``docker compose``) and
through ``agentcompass run harbor oracle mock -b path=DIR --env docker``; each task's reward and each step's
rewards are the same. Harbor's job is read with Harbor's own models (``TrialResult``) in its environment.

The tasks: both steps solved; step two failing its verifier (and step one's ``reward.json`` holding a second
key, counted 0 where a step lacks it); the same with ``multi_step_reward_strategy = "final"``; step one under its
``min_reward``, which stops the steps; step one's agent running past its ``[steps.agent] timeout_sec`` — Harbor
verifies that step all the same and goes on (the attempt is a ``RUN_ERROR`` here, with Harbor's reward kept in
``artifacts["harbor_reward"]``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli_processes import read_jsonl, run_cli_subprocess
from tests.helpers.docker_engine import require_engine

pytestmark = pytest.mark.docker

HARBOR_VENV = Path.home() / ".cache" / "agentcompass-tests" / "harbor-0.25.0-venv"
DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\n"


def _check_file(path: str, word: str, extra: str = "") -> str:
    """A ``test.sh`` giving 1 when ``path`` holds ``word``, else 0 (``reward.json`` with ``extra`` keys when
    given)."""
    if extra:
        return (f"#!/bin/bash\nif grep -qx {word} {path}; then r=1; else r=0; fi\n"
                f"echo \"{{\\\"reward\\\": $r, {extra}}}\" > /logs/verifier/reward.json\n")
    return (f"#!/bin/bash\nif grep -qx {word} {path}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n")


def two_step_task(root: Path, name: str, *, toml: str = "", step_one: str = "", solve_one: str = "",
                  solve_two: str = "", step_one_extra: str = "") -> None:
    """Step ``one`` writes ``a`` to /app/a.txt (its own tests check it); step ``two`` writes ``b`` to /app/b.txt
    (the task's tests check it). ``step_one`` is added to step one's table; the solutions can be replaced."""
    task = root / name
    files = {
        "task.toml": f'version = "1.0"\n{toml}\n[[steps]]\nname = "one"\n{step_one}\n[[steps]]\nname = "two"\n',
        "environment/Dockerfile": DOCKERFILE,
        "steps/one/instruction.md": "Write `a` to /app/a.txt.\n",
        "steps/one/solution/solve.sh": "#!/bin/bash\n" + (solve_one or "echo a > /app/a.txt\n"),
        "steps/one/tests/test.sh": _check_file("/app/a.txt", "a", step_one_extra),
        "steps/two/instruction.md": "Now write `b` to /app/b.txt.\n",
        "steps/two/solution/solve.sh": "#!/bin/bash\n" + (solve_two or "echo b > /app/b.txt\n"),
        "tests/test.sh": _check_file("/app/b.txt", "b"),
    }
    for relative, text in files.items():
        path = task / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def tasks(root: Path) -> Path:
    two_step_task(root, "both-solved")
    two_step_task(root, "step-two-fails", solve_two="echo c > /app/b.txt\n", step_one_extra='\\"speed\\": 0.5')
    two_step_task(root, "final-strategy", toml='multi_step_reward_strategy = "final"',
                  solve_two="echo c > /app/b.txt\n")
    two_step_task(root, "min-reward-stops", step_one="min_reward = 1.0", solve_one="echo z > /app/a.txt\n")
    two_step_task(root, "agent-times-out", step_one="[steps.agent]\ntimeout_sec = 3.0",
                  solve_one="echo a > /app/a.txt\nsleep 60\n")
    return root


#: What each task scores (Harbor's figures; the test checks Harbor gives them too).
EXPECTED: dict[str, dict[str, Any]] = {
    "both-solved": {"reward": {"reward": 1.0}, "steps": [{"reward": 1.0}, {"reward": 1.0}]},
    "step-two-fails": {"reward": {"reward": 0.5, "speed": 0.25},
                       "steps": [{"reward": 1.0, "speed": 0.5}, {"reward": 0.0}]},
    "final-strategy": {"reward": {"reward": 0.0}, "steps": [{"reward": 1.0}, {"reward": 0.0}]},
    "min-reward-stops": {"reward": {"reward": 0.0}, "steps": [{"reward": 0.0}]},
    "agent-times-out": {"reward": {"reward": 1.0}, "steps": [{"reward": 1.0}, {"reward": 1.0}]},
}

READ_JOB = """
import json, sys
from pathlib import Path
from harbor.models.trial.result import TrialResult

out = {}
for path in Path(sys.argv[1]).glob("*/*/result.json"):
    trial = TrialResult.model_validate_json(path.read_text())
    out[trial.task_name] = {
        "reward": trial.verifier_result.rewards if trial.verifier_result else None,
        "exception": trial.exception_info.exception_type if trial.exception_info else None,
        "steps": [{"name": s.step_name, "rewards": s.verifier_result.rewards if s.verifier_result else None,
                   "exception": s.exception_info.exception_type if s.exception_info else None}
                  for s in trial.step_results or []],
    }
print(json.dumps(out))
"""


def _harbor() -> Path:
    harbor = HARBOR_VENV / "bin" / "harbor"
    compose = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
    problem = None if harbor.exists() else f"no harbor test environment at {HARBOR_VENV} " \
                                           "(tests/export/test_atif_export.py makes it)"
    if problem is None and compose.returncode != 0:
        problem = "`docker compose` is not installed (Harbor runs tasks through it; .ci/run installs it)"
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    return harbor


def _numbers(rewards: dict[str, Any] | None) -> dict[str, float] | None:
    return None if rewards is None else {k: float(v) for k, v in rewards.items()}


def test_multi_step_tasks_score_as_a_real_harbor_run_scores_them(tmp_path: Path) -> None:
    require_engine()
    harbor = _harbor()
    root = tasks(tmp_path / "tasks")
    jobs = tmp_path / "jobs"
    ran = subprocess.run([str(harbor), "run", "-p", str(root), "-a", "oracle", "-o", str(jobs), "-n", "5", "-y",
                          "-q"], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                         env={**os.environ, "NO_COLOR": "1"})
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
    read = subprocess.run([str(HARBOR_VENV / "bin" / "python"), "-c", READ_JOB, str(jobs)], capture_output=True,
                          text=True, timeout=120)
    assert read.returncode == 0, read.stderr[-2000:]
    theirs = json.loads(read.stdout)
    assert sorted(theirs) == sorted(EXPECTED)

    done = run_cli_subprocess("run", "harbor", "oracle", "mock", "-b", f"path={root}", "--env", "docker",
                              "-o", str(tmp_path / "run"), testing=False, timeout=900)
    ours = {r["task_id"]: r for r in read_jsonl(tmp_path / "run" / "results.jsonl")}
    assert sorted(ours) == sorted(EXPECTED), done.stderr[-3000:]

    for name, expected in EXPECTED.items():
        harbor_trial, mine = theirs[name], ours[name]
        # Harbor's figures are the ones expected ...
        assert _numbers(harbor_trial["reward"]) == expected["reward"], (name, harbor_trial)
        assert [_numbers(s["rewards"]) for s in harbor_trial["steps"]] == expected["steps"], (name, harbor_trial)
        assert harbor_trial["exception"] is None, (name, harbor_trial)
        # ... and ours are Harbor's: the task's reward and each step's
        steps = mine["artifacts"]["steps"]
        assert [s["name"] for s in steps] == [s["name"] for s in harbor_trial["steps"]], name
        assert [_numbers(s.get("rewards")) for s in steps] == \
            [_numbers(s["rewards"]) for s in harbor_trial["steps"]], (name, steps)
        if name == "agent-times-out":
            # Harbor: the step's AgentTimeoutError, the step verified all the same, the trial scored without an
            # exception. Here: the same steps, the attempt a RUN_ERROR (as a single-step agent timeout is).
            assert harbor_trial["steps"][0]["exception"] == "AgentTimeoutError"
            assert mine["status"] == "RUN_ERROR" and "timed out after 3 s" in mine["error"], mine.get("error")
            assert "timed out" in steps[0]["agent_error"]
            assert _numbers(mine["artifacts"]["harbor_reward"]) == _numbers(harbor_trial["reward"])
        else:
            assert mine["status"] == "COMPLETED", (name, mine.get("error"))
            assert _numbers(mine["metrics"]) == _numbers(harbor_trial["reward"]), name
