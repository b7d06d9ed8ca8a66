"""``terminus-2`` in the ``local`` environment (the host's tmux): tasks that run at once each get a tmux server
of their own, and the task's time limit stops the agent."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from typing import Any

import pytest
from agentcompass.runtime import BaseBenchmark, TaskSpec, TaskStatus

from tests.harnesses.support import assistant_turns, run_with, text
from tests.harnesses.terminus2_support import reply

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux on this machine")


class Numbers(BaseBenchmark):
    """Tasks ``t1``, ``t2``, ...: write the task's number into ``out.txt``; score 1 when it is there."""

    name = "numbers"
    evaluation_environment_mode = "reuse"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.count = int(options.get("count", 2))
        self.limit = options.get("limit")

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        extra = {"agent_timeout_sec": float(self.limit)} if self.limit else {}
        return [TaskSpec(task_id=f"t{i}", data={"instruction": f"Write {i} into out.txt.", **extra})
                for i in range(1, self.count + 1)]

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        try:
            written = (await env.read_text("out.txt")).strip()
        except FileNotFoundError:
            written = ""
        return replace(result, metrics={"score": float(written == task.task_id[1:])})


def writes_the_number(request: dict[str, Any]) -> dict[str, Any]:
    number = re.search(r"Write (\d+) into out\.txt", str(request["messages"][0]["content"]))
    assert number is not None
    turn = assistant_turns(request)
    if turn == 0:
        return text(reply(f"echo {number.group(1)} > out.txt\n", duration=0.5))
    return text(reply(complete=True))


async def test_tasks_at_once_each_have_their_own_tmux(tmp_path) -> None:  # type: ignore[no-untyped-def]
    run, server = await run_with(writes_the_number, Numbers(count=3), "terminus-2", concurrency=3,
                                 run_dir=tmp_path / "run")
    assert run.metric("score") == {"t1": 1.0, "t2": 1.0, "t3": 1.0}, [r.error for r in run.results]
    assert {r.artifacts["terminus-2"]["stop_reason"] for r in run.results} == {"task_complete"}
    assert len(server.requests) == 9


async def test_the_tasks_time_limit_stops_the_agent(tmp_path) -> None:  # type: ignore[no-untyped-def]
    run, server = await run_with(lambda r: text(reply("sleep 30\n", duration=30)), Numbers(count=1, limit="2"),
                                 "terminus-2", run_dir=tmp_path / "run")
    result = run.result("t1")
    assert result.status is TaskStatus.RUN_ERROR and result.artifacts["terminus-2"]["stop_reason"] == "time_limit"
    assert "exceeded the task's time limit of 2 s" in result.error and len(server.requests) == 1
    assert result.artifacts["terminus-2"]["seconds"] < 10
