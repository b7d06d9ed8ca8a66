"""The ``react`` harness through the real lifecycle on ``local``, against an OpenAI-compatible server on loopback
that answers with tool calls (through the ``openai-compatible`` provider: every call metered)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.serialization import result_from_json
from agentcompass_harnesses.react import NUDGE, ReactHarness

from tests.harnesses.support import (
    CODING_TASKS,
    Tiny,
    assistant_turns,
    call,
    last_tool_output,
    run_with,
    solver,
    text,
    tool_messages,
)


async def test_react_solves_example_coding(tmp_path: Path) -> None:
    run, server = await run_with(solver, "example_coding", run_dir=tmp_path / "run", concurrency=6)
    assert run.exit_code == 0
    assert run.metric("score") == dict.fromkeys(CODING_TASKS, 1.0)
    for task_id in CODING_TASKS:
        result = run.result(task_id)
        assert result.final_answer == f"solved {task_id}"
        record = result.artifacts["react"]
        assert record["stop_reason"] == "submit" and record["turns"] == 3 and record["tool_calls"] == 3
        assert record["bash_calls"] == 1 and record["tool_errors"] == 0
    first = server.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["bash", "read_file", "write_file", "submit"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["command"]
    assert first["messages"][0]["role"] == "system" and first["messages"][1]["role"] == "user"
    bash_outputs = [m for r in server.requests for m in tool_messages(r) if "imported" in m]
    assert bash_outputs and bash_outputs[0].startswith("[exit code 0]")
    # every call is metered into trajectories.jsonl
    calls = run.trajectories
    assert len(calls) == 3 * len(CODING_TASKS) == len(server.requests)
    assert {c["task_id"] for c in calls} == set(CODING_TASKS)


async def test_a_model_that_never_submits_stops_at_max_turns(tmp_path: Path) -> None:
    run, server = await run_with(lambda r: call("bash", command="echo step"), Tiny,
                                 harness_args={"max_turns": "4"}, run_dir=tmp_path / "run")
    result = run.result("t1")
    assert result.status is TaskStatus.COMPLETED and result.metrics == {"score": 1.0}
    assert result.final_answer is None
    assert result.artifacts["react"]["stop_reason"] == "max_turns"
    assert result.artifacts["react"]["turns"] == 4 == len(server.requests)


async def test_a_reply_without_a_tool_call_is_nudged_once(tmp_path: Path) -> None:
    run, server = await run_with(lambda r: text("I am finished."), Tiny, run_dir=tmp_path / "run")
    result = run.result("t1")
    assert result.status is TaskStatus.COMPLETED
    assert result.artifacts["react"]["stop_reason"] == "no_tool_call"
    assert result.final_answer == "I am finished."
    assert len(server.requests) == 2
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": NUDGE}

    # the nudge is once per task: text, tool call, text ends the loop at the second text
    def script(request: dict[str, Any]) -> dict[str, Any]:
        return [text("thinking"), call("bash", command="true"), text("done now")][min(assistant_turns(request), 2)]

    run, server = await run_with(script, Tiny, run_dir=tmp_path / "run2")
    assert run.result("t1").artifacts["react"]["stop_reason"] == "no_tool_call"
    assert run.result("t1").final_answer == "done now" and len(server.requests) == 3


async def test_a_command_that_hangs_is_killed_at_command_timeout(tmp_path: Path) -> None:
    marker = "61.2345"

    def script(request: dict[str, Any]) -> dict[str, Any]:
        if assistant_turns(request) == 0:
            return call("bash", command=f"echo started; sleep {marker}; echo never")
        return call("submit", 2, answer=last_tool_output(request))

    started = time.monotonic()
    run, _ = await run_with(script, Tiny, harness_args={"command_timeout": "1"}, run_dir=tmp_path / "run")
    assert time.monotonic() - started < 30
    result = run.result("t1")
    assert result.status is TaskStatus.COMPLETED
    output = result.final_answer
    assert "timed out after 1 s and was killed" in output and "started" in output and "never" not in output
    assert result.artifacts["react"]["bash_timeouts"] == 1
    left = await asyncio.to_thread(subprocess.run, ["pgrep", "-f", f"sleep {marker}"], capture_output=True,
                                   text=True)
    assert left.stdout.strip() == "", "the timed-out command's process tree was not killed"


async def test_huge_outputs_are_cut_for_the_model(tmp_path: Path) -> None:
    def script(request: dict[str, Any]) -> dict[str, Any]:
        return [
            call("bash", 1, command="head -c 30000000 /dev/zero | tr '\\0' x; echo; echo THE-END"),
            call("bash", 2, command="head -c 5000000 /dev/zero | tr '\\0' y > big.txt; printf 'a\\0b' > bin.dat"),
            call("read_file", 3, path="big.txt"),
            call("read_file", 4, path="bin.dat"),
            call("read_file", 5, path="missing.txt"),
            call("no_such_tool", 6),
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_7", "type": "function", "function": {"name": "bash", "arguments": "{not json"}}]},
            call("submit", 8, answer="ok"),
        ][assistant_turns(request)]

    run, server = await run_with(script, Tiny, harness_args={"max_output": "2000", "max_turns": "10"},
                                 run_dir=tmp_path / "run")
    assert run.result("t1").artifacts["react"]["stop_reason"] == "submit"
    outputs = tool_messages(server.requests[-1])
    huge, _, big, binary, missing, unknown, bad = outputs
    assert len(huge) < 2300 and "characters omitted" in huge and huge.startswith("[exit code 0]")
    assert len(big) < 2300 and "characters omitted" in big and "sed -n" in big
    assert "binary file of 3 bytes" in binary
    assert missing.startswith("error: cannot read 'missing.txt'")
    assert "there is no tool 'no_such_tool'" in unknown and "not valid JSON" in bad
    assert run.result("t1").artifacts["react"]["tool_errors"] == 3
    assert max(len(str(r["messages"])) for r in server.requests) < 20000


@pytest.mark.parametrize(("status", "message", "expect"), [
    (400, "unsupported parameter: frobnicate", "frobnicate"),
    (500, "the server fell over", "server error"),
])
async def test_a_model_error_ends_the_task_with_its_cause(tmp_path: Path, status: int, message: str,
                                                          expect: str) -> None:
    def script(request: dict[str, Any]) -> Any:
        if assistant_turns(request) == 0:
            return call("bash", command="echo one")
        return status, {"error": {"message": message}}

    run, _ = await run_with(script, Tiny, run_dir=tmp_path / "run")
    if status >= 500:  # a provider outage: the attempt is recorded, the task stays unfinished (resumable)
        assert run.results == [] and run.summary["n_unfinished"] == 1
        (result,) = [result_from_json(json.loads(x)) for x in (tmp_path / "run" / "attempts.jsonl").open()]
        assert result.error.startswith("model provider outage") and expect in result.error
        return
    result = run.result("t1")
    assert result.status is TaskStatus.RUN_ERROR and result.error_phase == "run"
    assert result.error.startswith("model call failed") and expect in result.error
    assert result.artifacts["react"]["stop_reason"] == "model_error"
    assert result.artifacts["react"]["turns"] == 2
    assert run.trajectories[-1]["error"]  # the failed call is in the trajectory too


OVERFLOW = (400, {"error": {"message": "This model's maximum context length is 1500 tokens. However, your "
                                       "messages resulted in 2100 tokens. Please reduce the length of the messages.",
                            "code": "context_length_exceeded"}})


async def test_context_overflow_removes_old_tool_outputs_first(tmp_path: Path) -> None:
    def script(request: dict[str, Any]) -> Any:
        if len(str(request["messages"])) > 7000:
            return OVERFLOW
        turn = sum(1 for m in request["messages"] if m.get("role") == "tool")
        if turn < 4:
            return call("bash", turn + 1, command=f"python3 -c \"print('{turn}' * 3000)\"")
        return call("submit", 9, answer="done")

    run, server = await run_with(script, Tiny, run_dir=tmp_path / "run")
    result = run.result("t1")
    assert result.status is TaskStatus.COMPLETED and result.final_answer == "done"
    context = result.artifacts["react"]["context"]
    assert context["overflow_errors"] >= 1 and context["shrinks"] >= 1 and context["outputs_removed"] >= 1
    assert {e["reason"] for e in context["events"]} == {"overflow"}
    last = tool_messages(server.requests[-1])
    assert last[0].startswith("[tool output removed to fit the model's context window")
    assert "3" * 3000 in last[-1]  # the latest output stays
    errored = [c for c in run.trajectories if c.get("error")]
    assert len(errored) == context["overflow_errors"]


async def test_context_that_never_fits_is_a_run_error(tmp_path: Path) -> None:
    run, _ = await run_with(lambda r: OVERFLOW, Tiny, run_dir=tmp_path / "run")
    result = run.result("t1")
    assert result.status is TaskStatus.RUN_ERROR and result.error.startswith("context overflow")
    assert result.artifacts["react"]["stop_reason"] == "context_overflow"


async def test_a_conversation_over_budget_is_shrunk_before_the_call(tmp_path: Path) -> None:
    def script(request: dict[str, Any]) -> Any:
        turn = sum(1 for m in request["messages"] if m.get("role") == "tool")
        if turn < 3:
            return call("bash", turn + 1, command="python3 -c \"print('z' * 3000)\"")
        return call("submit", 9, answer="done")

    run, server = await run_with(script, Tiny, harness_args={"max_context_chars": "5000"},
                                 run_dir=tmp_path / "run")
    context = run.result("t1").artifacts["react"]["context"]
    assert context["overflow_errors"] == 0 and {e["reason"] for e in context["events"]} == {"budget"}
    assert all(len(str(r["messages"])) < 9000 for r in server.requests)


async def test_the_tasks_time_limit_stops_the_agent(tmp_path: Path) -> None:
    started = time.monotonic()
    run, _ = await run_with(lambda r: call("bash", command="sleep 5"), Tiny, benchmark_args={"limit": "1"},
                            run_dir=tmp_path / "run")
    assert time.monotonic() - started < 15
    result = run.result("t1")
    assert result.status is TaskStatus.RUN_ERROR and "time limit of 1 s" in result.error
    assert result.metrics == {}


async def test_a_benchmark_without_instructions_is_named(tmp_path: Path) -> None:
    run, server = await run_with(lambda r: text("x"), Tiny, benchmark_args={"no_instruction": "1"},
                                 run_dir=tmp_path / "run")
    result = run.result("t1")
    assert result.status is TaskStatus.RUN_ERROR and "states no instruction" in result.error
    assert server.requests == []


async def test_system_prompt_from_a_file(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("You work in {workdir}. Calls stop after {command_timeout} s.")
    _, server = await run_with(lambda r: call("submit", answer="x"), Tiny,
                               harness_args={"system_prompt": f"@{prompt}", "command_timeout": "7"},
                               run_dir=tmp_path / "run")
    system = server.requests[0]["messages"][0]["content"]
    assert system.startswith("You work in /") and system.endswith("Calls stop after 7 s.")
    assert "{workdir}" not in system


@pytest.mark.parametrize("options", [
    {"bogus": "1"}, {"max_turns": "0"}, {"max_turns": "x"}, {"command_timeout": "-1"},
    {"system_prompt": "@/no/such/file"}, {"max_output": "nan"},
])
def test_bad_options_are_usage_errors(options: dict[str, str]) -> None:
    with pytest.raises(UsageError):
        ReactHarness(**options)


def test_defaults() -> None:
    harness = ReactHarness()
    assert (harness.max_turns, harness.command_timeout, harness.max_output) == (30, 120.0, 16000)
    assert "{workdir}" in harness.system_prompt


async def test_installed_under_its_name(tmp_path: Path) -> None:
    run, _ = await run_with(lambda r: call("submit", answer="42"), Tiny, run_dir=tmp_path / "run")
    assert run.request.harness == "react" and run.result("t1").final_answer == "42"
    assert isinstance(run.result("t1"), RunResult)


async def test_tool_calls_without_ids_or_with_object_arguments(tmp_path: Path) -> None:
    from agentcompass.testing import run_benchmark

    seen: list[dict[str, Any]] = []

    def script(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        if assistant_turns(request) == 0:  # as some providers give them: no id, arguments as an object
            return {"content": None, "tool_calls": [{"function": {"name": "bash", "arguments": {"command": "echo hi"}}}]}
        return call("submit", answer=last_tool_output(request))

    run = await run_benchmark(Tiny, "react", script, run_dir=tmp_path / "run")  # in process: a ScriptedModel
    result = run.result("t1")
    assert result.final_answer == "[exit code 0]\nhi"
    assistant, tool = seen[1]["messages"][2], seen[1]["messages"][3]
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"command": "echo hi"}'
    assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"] == "call_1_0"
