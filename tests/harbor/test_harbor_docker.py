"""The ``harbor`` benchmark in the ``docker`` environment — Harbor's own layout (``/app``, ``/logs``, ``/tests``,
``/solution``), each task's ``environment/Dockerfile`` built once per run (reused by later runs), and the
statuses and rewards the tasks' own verifiers give when run by hand with ``docker run``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.testing import run_benchmark

from tests.harbor.taskdirs import EXPECTED, separate_task, suite
from tests.harnesses.support import assistant_turns, call, run_with
from tests.helpers.docker_engine import require_engine

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def engine() -> None:
    require_engine()


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return suite(tmp_path_factory.mktemp("harbor-docker") / "tasks", docker=True)


def by_hand(task: Path) -> float | None:
    """The task's verdict with nothing but ``docker build`` and ``docker run``: solve, copy the tests in, run
    them, read reward.txt / reward.json. ``None`` when the verifier wrote no valid reward."""
    built = subprocess.run(["docker", "build", "-q", str(task / "environment")], capture_output=True, text=True,
                           timeout=300, check=True)
    image = built.stdout.strip()
    script = ("mkdir -p /logs/verifier /app && cd /app && bash /solution/solve.sh >/dev/null 2>&1; "
              "bash /tests/test.sh >/dev/null 2>&1; cat /logs/verifier/reward.json 2>/dev/null || "
              "cat /logs/verifier/reward.txt 2>/dev/null")
    done = subprocess.run(["docker", "run", "--rm", "--network", "none",
                           "-v", f"{task / 'solution'}:/solution:ro", "-v", f"{task / 'tests'}:/tests:ro",
                           image, "sh", "-c", script], capture_output=True, text=True, timeout=120)
    try:
        value = json.loads(done.stdout) if done.stdout.strip() else None
    except json.JSONDecodeError:
        return None
    value = value.get("reward") if isinstance(value, dict) else value
    return float(value) if isinstance(value, (int, float)) and value == value else None


async def test_oracle_and_nop_match_the_verifiers(tasks: Path, tmp_path: Path) -> None:
    oracle = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(tasks)},
                                 run_dir=tmp_path / "oracle", concurrency=6)
    nop = await run_benchmark("harbor", "nop", environment="docker", benchmark_args={"path": str(tasks)},
                              run_dir=tmp_path / "nop", concurrency=6)
    for which, run in ((0, oracle), (1, nop)):
        for task_id, outcomes in EXPECTED.items():
            expect, result = outcomes[which], run.result(task_id)
            assert result.status.value == expect.status, (which, task_id, result.error)
            if expect.reward is not None:
                assert result.metrics["reward"] == expect.reward, (which, task_id)
            if expect.error is not None:
                assert expect.error in (result.error or ""), (which, task_id, result.error)
    assert oracle.result("multi-reward").metrics == {"reward": 1.0, "accuracy": 1.0, "checked": 4.0}
    # the same verdicts as the verifiers run by hand (the slow solution is cut off by its time limit here)
    for task_id in ("hello", "wrong-solution", "multi-reward", "image-data"):
        assert by_hand(tasks / task_id) == oracle.result(task_id).metrics["reward"], task_id
    for task_id in ("no-reward", "bad-reward"):
        assert by_hand(tasks / task_id) is None

    # a second run builds nothing: it says it reuses the images (one per task with a Dockerfile)
    nop_logs = nop.jsonl("logs.jsonl")
    assert not [e for e in nop_logs if e.get("event") == "docker.image_built"]
    assert len([e for e in nop_logs if e.get("event") == "docker.image_reused"]) == len(EXPECTED)


async def test_react_solves_a_task_without_seeing_its_tests(tasks: Path, tmp_path: Path) -> None:
    def agent(request: dict[str, Any]) -> dict[str, Any]:
        turn = assistant_turns(request)
        if turn == 0:
            return call("bash", 1, command="pwd; ls -A /tests /solution 2>&1; ls -A /logs/verifier; "
                                           "grep -rl 'checking /app/hello.txt' /app /tmp /logs /root /opt /home /srv /var 2>/dev/null || true")
        if turn == 1:
            return call("write_file", 2, path="hello.txt", content="hello\n")
        return call("submit", 3, answer="done")

    run, server = await run_with(agent, "harbor", environment="docker", benchmark_args={"path": str(tasks)},
                                 task_ids=["hello"], run_dir=tmp_path / "run")
    result = run.result("hello")
    assert result.status is TaskStatus.COMPLETED and result.metrics == {"reward": 1.0}, result.error
    looked = next(m["content"] for m in server.requests[1]["messages"] if m.get("role") == "tool")
    lines = looked.splitlines()
    assert lines[1] == "/app"
    assert "ls: cannot access '/tests': No such file or directory" in looked
    assert "ls: cannot access '/solution': No such file or directory" in looked
    assert "test.sh" not in looked and "solve.sh" not in looked
    assert server.requests[0]["messages"][1]["content"].startswith("Create the file /app/hello.txt")


async def test_a_prewritten_reward_does_not_count_in_docker(tasks: Path, tmp_path: Path) -> None:
    async def cheat(task, prepared, req, plan, env):  # type: ignore[no-untyped-def]
        await env.write_text("/logs/verifier/reward.json", json.dumps({"reward": 1}))
        await env.write_text("/logs/verifier/reward.txt", "1")
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED)

    run = await run_benchmark("harbor", cheat, environment="docker", benchmark_args={"path": str(tasks)},
                              task_ids=["hello", "no-reward"], run_dir=tmp_path / "run")
    assert run.result("hello").metrics == {"reward": 0.0}
    assert run.result("no-reward").status is TaskStatus.EVAL_ERROR


async def test_fresh_verification_in_docker(tmp_path: Path) -> None:
    root = separate_task(tmp_path / "tasks")
    fresh = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                                run_dir=tmp_path / "fresh")
    assert fresh.result("separate").metrics == {"reward": 1.0}, fresh.result("separate").error
    assert fresh.result("separate").artifacts["verifier"]["environment"] == "fresh"
    shared = await run_benchmark("harbor", "oracle", environment="docker",
                                 benchmark_args={"path": str(root), "verify": "shared"}, run_dir=tmp_path / "shared")
    assert shared.result("separate").metrics == {"reward": 0.0}


async def test_command_harness_on_a_harbor_task(tasks: Path, tmp_path: Path) -> None:
    run, _ = await run_with(lambda r: call("submit", answer="x"), "harbor", "command", environment="docker",
                            benchmark_args={"path": str(tasks)}, task_ids=["hello", "slow-solution"],
                            harness_args={"command": "grep -o /app/hello.txt {instruction_file} | "
                                                     "xargs -I{} sh -c 'echo hello > {}'; sleep 2"},
                            run_dir=tmp_path / "run")
    assert run.result("hello").metrics == {"reward": 1.0}, run.result("hello").error
    slow = run.result("slow-solution")  # [agent] timeout_sec = 1
    assert slow.status is TaskStatus.RUN_ERROR and "the task's time limit" in slow.error
