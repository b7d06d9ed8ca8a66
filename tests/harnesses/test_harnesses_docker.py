"""``react`` and ``command`` in the ``docker`` environment: containers with no network, the model reached by
``react`` in process and by the agent program through the gateway's socket forwarder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.harnesses.support import (
    AGENT,
    answers_with_the_reference,
    assistant_turns,
    call,
    last_tool_output,
    run_with,
    solver,
)
from tests.helpers.docker_engine import require_engine

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def engine() -> None:
    require_engine()


async def test_react_solves_example_coding_in_docker(tmp_path: Path) -> None:
    run, server = await run_with(solver, "example_coding", environment="docker", task_ids=["roman", "flatten"],
                                 run_dir=tmp_path / "run")
    assert run.metric("score") == {"roman": 1.0, "flatten": 1.0}, [r.error for r in run.results]
    assert all(r.artifacts["react"]["stop_reason"] == "submit" for r in run.results)
    assert len(server.requests) == 6


async def test_react_command_timeout_kills_the_command_in_the_container(tmp_path: Path) -> None:
    def script(request: dict[str, Any]) -> dict[str, Any]:
        turn = assistant_turns(request)
        if turn == 0:
            return call("bash", 1, command="sleep 300 & sleep 301")
        if turn == 1:
            return call("bash", 2, command="ps -eo args | grep -c '^sleep 30[01]' || true")
        return call("submit", 3, answer=last_tool_output(request))

    run, _ = await run_with(script, "example_coding", environment="docker", task_ids=["roman"],
                            harness_args={"command_timeout": "2"}, run_dir=tmp_path / "run")
    result = run.result("roman")
    assert result.artifacts["react"]["bash_timeouts"] == 1
    assert result.final_answer.splitlines()[1] == "0"  # neither sleep survived the timeout


async def test_an_agent_program_reaches_the_gateway_from_a_container(tmp_path: Path) -> None:
    command = "python3 - {instruction_file} <<'EOF'\n" + AGENT + "\nEOF"
    run, server = await run_with(answers_with_the_reference, "example_coding", "command", environment="docker",
                                 harness_args={"command": command}, task_ids=["roman", "word_count"],
                                 run_dir=tmp_path / "run")
    assert run.metric("score") == {"roman": 1.0, "word_count": 1.0}, [r.error for r in run.results]
    assert run.result("roman").artifacts["command"]["instruction_file"] == "/tmp/agentcompass/instruction.md"
    assert {c["via"] for c in run.trajectories} == {"gateway"} and len(server.requests) == 2
