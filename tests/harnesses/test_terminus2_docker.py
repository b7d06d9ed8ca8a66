"""``terminus-2`` on a Harbor task in the ``docker`` environment: a tmux session in the task's container, the
scripted model's keystrokes typed into it, the screen as what the model reads next, the task's own verifier
scoring what is left."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentcompass.runtime import TaskStatus

from tests.harnesses.support import run_with
from tests.harnesses.terminus2_support import IDLE, INSTRUCTION, SOLVING, scripted, tmux_task
from tests.helpers.docker_engine import require_engine

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def engine() -> None:
    require_engine()


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmux_task(tmp_path_factory.mktemp("terminus2") / "tasks")


async def test_terminus2_solves_a_task_through_tmux_keystrokes(tasks: Path, tmp_path: Path) -> None:
    run, server = await run_with(scripted(SOLVING), "harbor", "terminus-2", environment="docker",
                                 benchmark_args={"path": str(tasks)}, run_dir=tmp_path / "run")
    result = run.result("hello-tmux")
    assert result.status is TaskStatus.COMPLETED and result.metrics == {"reward": 1.0}, result.error
    record = result.artifacts["terminus-2"]
    assert record["stop_reason"] == "task_complete" and record["parse_errors"] == 1
    assert record["episodes"] == 5 and record["commands"] == 2 and record["tmux"] == "present"

    prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert len(prompts) == 5 and all(r["messages"][-1]["role"] == "user" for r in server.requests)
    # instruction.md as it is (its final newline too), as Harbor reads it
    assert f"Task Description:\n{INSTRUCTION}\n\n\nCurrent terminal state:\nCurrent Terminal Screen:\nroot@" in prompts[0]
    assert prompts[1].startswith("Previous response had parsing errors:\nERROR: No valid JSON found in response")
    # what the shell printed for the check is what the model reads next
    assert prompts[3].startswith("New Terminal Output:") and "cat /app/hello.txt\nhello\n" in prompts[3]
    assert prompts[4].startswith("Current terminal state:\n") and "Are you sure" in prompts[4]
    # every call went through the run's meter, one trajectory entry per request
    assert len([c for c in run.trajectories if c.get("role") == "agent"]) == 5


async def test_terminus2_scores_zero_when_the_script_does_not_solve_it(tasks: Path, tmp_path: Path) -> None:
    run, server = await run_with(scripted(IDLE), "harbor", "terminus-2", environment="docker",
                                 benchmark_args={"path": str(tasks)}, run_dir=tmp_path / "run")
    result = run.result("hello-tmux")
    assert result.status is TaskStatus.COMPLETED and result.metrics == {"reward": 0.0}, result.error
    assert result.artifacts["terminus-2"]["stop_reason"] == "task_complete" and len(server.requests) == 3


async def test_terminus2_without_tmux_in_an_offline_container_is_a_run_error(tmp_path: Path) -> None:
    from tests.harbor.taskdirs import REWARD_BY_EXIT, write_task

    write_task(tmp_path / "tasks", "no-tmux", instruction="Do nothing.", test="true\n" + REWARD_BY_EXIT,
               toml='[environment]\nnetwork_mode = "no-network"')
    run, server = await run_with(scripted(IDLE), "harbor", "terminus-2", environment="docker",
                                 benchmark_args={"path": str(tmp_path / "tasks")}, run_dir=tmp_path / "run")
    result = run.result("no-tmux")
    assert result.status is TaskStatus.RUN_ERROR and not server.requests
    assert "tmux is not installed in the task's environment and installing it with apt-get failed" in result.error
    assert result.artifacts["terminus-2"]["stop_reason"] == "tmux_error"
