"""The ``command`` harness through the real lifecycle on ``local``: a small agent program that calls the run's
model gateway with nothing but the standard library, time limits, failures, kept output."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime import TaskStatus
from agentcompass_harnesses.command import CommandHarness, render

from tests.harnesses.support import AGENT, CODING_TASKS, Tiny, answers_with_the_reference, run_with, text


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return path


async def test_an_agent_program_solves_example_coding_through_the_gateway(tmp_path: Path, agent: Path) -> None:
    run, server = await run_with(answers_with_the_reference, "example_coding", "command",
                                 harness_args={"command": f"python3 {agent} {{instruction_file}}"},
                                 run_dir=tmp_path / "run", concurrency=6)
    assert run.exit_code == 0, [r.error for r in run.results]
    assert run.metric("score") == dict.fromkeys(CODING_TASKS, 1.0)
    result = run.result("roman")
    assert result.final_answer == "wrote solution.py"
    record = result.artifacts["command"]
    assert record["returncode"] == 0 and not record["timed_out"]
    assert "agent done for roman" in record["stdout_tail"] and "nothing wrong" in record["stderr_tail"]
    kept = run.run_dir / "artifacts" / "roman" / "attempt-1" / "command"
    assert (kept / "stdout.txt").read_text() == "agent done for roman\n"
    assert "nothing wrong" in (kept / "stderr.txt").read_text()
    # every call went through the gateway and was metered
    calls = run.trajectories
    assert len(calls) == len(CODING_TASKS) == len(server.requests)
    assert {c["via"] for c in calls} == {"gateway"}


async def test_the_environment_and_placeholders(tmp_path: Path) -> None:
    command = ("printf '%s|%s|%s|%s\\n' \"$AGENTCOMPASS_TASK_ID\" \"$AGENTCOMPASS_MODEL\" {task_id} {model}; "
               "test -n \"$OPENAI_BASE_URL\" && test -n \"$OPENAI_API_KEY\" && echo gateway-set; "
               "cat {instruction_file}; echo; echo ${HOME:+home-set}; echo {instruction}")
    run, _ = await run_with(text, Tiny, "command", harness_args={"command": command}, run_dir=tmp_path / "run")
    result = run.result("t1")
    assert result.status is TaskStatus.COMPLETED, result.error
    out = result.artifacts["command"]["stdout_tail"].splitlines()
    assert out[0] == "t1|openai-compatible/loopback|t1|openai-compatible/loopback"
    assert out[1:] == ["gateway-set", "Say hello, then submit.", "home-set", "Say hello, then submit."]
    assert result.artifacts["command"]["instruction_file"].endswith("/.agentcompass/instruction.md")  # local


async def test_a_program_that_runs_too_long_is_killed(tmp_path: Path) -> None:
    started = time.monotonic()
    run, _ = await run_with(text, "example_coding", "command",
                            harness_args={"command": "echo partial; sleep 30", "timeout": "1"},
                            task_ids=["roman"], run_dir=tmp_path / "run")
    assert time.monotonic() - started < 20
    result = run.result("roman")
    assert result.status is TaskStatus.RUN_ERROR
    assert "timed out after 1 s (timeout)" in result.error and result.metrics == {}
    assert (run.run_dir / "artifacts" / "roman" / "attempt-1" / "command" / "stdout.txt").read_text() == "partial\n"

    # check=false: recorded, and the benchmark scores what the program left (nothing: 0)
    run, _ = await run_with(text, "example_coding", "command",
                            harness_args={"command": "sleep 30", "timeout": "1", "check": "false"},
                            task_ids=["roman"], run_dir=tmp_path / "run2")
    result = run.result("roman")
    assert result.status is TaskStatus.COMPLETED and result.metrics["score"] == 0.0
    assert result.artifacts["command"]["timed_out"] and "timed out" in result.artifacts["command"]["error"]


async def test_the_tasks_time_limit_applies(tmp_path: Path) -> None:
    run, _ = await run_with(text, Tiny, "command", benchmark_args={"limit": "1"},
                            harness_args={"command": "sleep 30", "timeout": "100"}, run_dir=tmp_path / "run")
    result = run.result("t1")
    assert result.status is TaskStatus.RUN_ERROR and "the task's time limit" in result.error
    assert result.artifacts["command"]["timeout_s"] == 1.0


async def test_a_failing_program_is_a_run_error_with_its_output(tmp_path: Path) -> None:
    run, _ = await run_with(text, Tiny, "command",
                            harness_args={"command": "echo 'step 1 ok'; echo 'fatal: no such model' >&2; exit 4"},
                            run_dir=tmp_path / "run")
    result = run.result("t1")
    assert result.status is TaskStatus.RUN_ERROR and result.error_phase == "run"
    assert result.error == "the agent command exited with status 4: fatal: no such model"
    assert result.artifacts["command"]["returncode"] == 4


def test_render_quotes_values_and_leaves_other_braces() -> None:
    rendered = render("agent --task {instruction_file} --home ${HOME} {unknown} {workdir}",
                      {"instruction_file": "/tmp/a b.md", "workdir": "/w", "answer_file": "", "task_id": "",
                       "model": "", "instruction": ""})
    assert rendered == "agent --task '/tmp/a b.md' --home ${HOME} {unknown} /w"
    assert shlex.split(rendered)[2] == "/tmp/a b.md"


@pytest.mark.parametrize("options", [{}, {"command": " "}, {"command": "x", "timeout": "0"},
                                     {"command": "x", "check": "maybe"}, {"command": "x", "other": "1"}])
def test_bad_options_are_usage_errors(options: dict[str, str]) -> None:
    with pytest.raises(UsageError):
        CommandHarness(**options)
