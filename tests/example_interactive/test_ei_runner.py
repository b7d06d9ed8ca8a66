"""The upstream runner as a real subprocess, against the kit's loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from agentcompass.testing import LoopbackOpenAI
from ei_support import API_KEY, MockPolicy, run_runner, scripted, text, tool_call
from example_interactive.domain import POLICY, TOOLS, db_equal, replay
from example_interactive.user_sim import STOP


def request_for(task: dict, **extra) -> dict:
    return {"task_id": task["id"], "task": task, "max_turns": 20, **extra}


def golden_agent(task: dict):
    """An agent that makes exactly the golden tool calls, then answers in text."""
    steps = [tool_call(a["name"], f"call_{i}", **a["arguments"]) for i, a in enumerate(task["golden_actions"])]
    return scripted(*steps, text("All done."))


@pytest.mark.parametrize(
    "task_id",
    [
        "create_basic",
        "update_two_tasks",
        "policy_reopen_completed",
        "policy_other_users_task",
        "multi_create_then_complete",
        "multi_lookup_then_update",
    ],
)
def test_golden_agent_reaches_the_golden_db(runner_dir: Path, resolved_tasks, task_id):
    task = resolved_tasks[task_id]
    with LoopbackOpenAI(golden_agent(task)) as server:
        proc, out = run_runner(runner_dir, request_for(task), server.env("scripted-model"))
    assert proc.returncode == 0, proc.stderr
    golden = replay(task["initial_db"], task["golden_actions"])
    assert db_equal(out["final_db"], golden.db)
    if golden.transferred:
        assert out["termination"] == "transfer" and out["transferred"] is True
    else:
        assert out["termination"] == "user_stop" and out["user_stop_reason"] == "goal_met"
        assert out["messages"][-1] == {"role": "user", "content": STOP}
        assert out["final_answer"] == "All done."
    assert out["turns"] == len(task["golden_actions"]) + (0 if golden.transferred else 1)
    assert out["task_id"] == task_id and out["model"] == "scripted-model"


def test_protocol_of_the_model_calls(runner_dir: Path, resolved_tasks):
    task = resolved_tasks["create_basic"]
    with LoopbackOpenAI(golden_agent(task)) as server:
        proc, out = run_runner(runner_dir, request_for(task, model_params={"temperature": 0}), server.env("m-1"))
    assert proc.returncode == 0, proc.stderr
    assert server.auth_headers == [f"Bearer {API_KEY}"] * 2
    first, second = server.requests
    assert first["model"] == "m-1" and first["tools"] == TOOLS and first["temperature"] == 0
    assert first["messages"] == [
        {"role": "system", "content": POLICY},
        {"role": "user", "content": task["user"]["first_message"]},
    ]
    call, result = second["messages"][2:4]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == "create_task"
    assert result["role"] == "tool" and result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert json.loads(result["content"])["task_id"] == "task_7"
    # the trajectory written out is what the model saw, plus the last reply and the stop
    assert out["messages"][: len(second["messages"])] == second["messages"]
    assert API_KEY not in json.dumps(out)


def test_turn_limit(runner_dir: Path, resolved_tasks):
    task = resolved_tasks["create_basic"]
    always_reading = lambda body: tool_call("list_tasks", user_id="user_1")  # noqa: E731
    with LoopbackOpenAI(always_reading) as server:
        proc, out = run_runner(runner_dir, request_for(task, max_turns=4), server.env())
    assert proc.returncode == 0, proc.stderr
    assert out["termination"] == "max_turns" and out["turns"] == 4 and len(server.requests) == 4
    assert out["final_answer"] is None and out["tool_calls"] == 4
    assert db_equal(out["final_db"], task["initial_db"])


def test_transfer_ends_the_conversation(runner_dir: Path, resolved_tasks):
    task = resolved_tasks["policy_delete_request"]
    agent = scripted(
        text("Let me check."),
        tool_call("transfer_to_human_agents", summary="wants task_7 deleted"),
        text("never reached"),
    )
    with LoopbackOpenAI(agent) as server:
        proc, out = run_runner(runner_dir, request_for(task), server.env())
    assert proc.returncode == 0, proc.stderr
    assert out["termination"] == "transfer" and out["transferred"]
    assert out["turns"] == 2 and len(server.requests) == 2
    roles = [m["role"] for m in out["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert out["messages"][3]["content"] == task["user"]["follow_ups"][0]
    assert out["final_answer"] == "Let me check."


def test_script_exhausted_stops_the_user(runner_dir: Path, resolved_tasks):
    task = resolved_tasks["multi_lookup_then_update"]
    with LoopbackOpenAI(scripted()) as server:  # an agent that only chats
        proc, out = run_runner(runner_dir, request_for(task), server.env())
    assert proc.returncode == 0, proc.stderr
    assert out["termination"] == "user_stop" and out["user_stop_reason"] == "script_exhausted"
    users = [m["content"] for m in out["messages"] if m["role"] == "user"]
    assert users == [task["user"]["first_message"], *task["user"]["follow_ups"], STOP]


def test_tool_errors_go_back_to_the_agent(runner_dir: Path, resolved_tasks):
    task = resolved_tasks["create_basic"]
    bad_json = {
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "create_task", "arguments": "{oops"}}],
    }
    agent = scripted(
        tool_call("create_task", user_id="user_9", title="x"),
        tool_call("delete_task", task_id="task_1"),
        tool_call("update_task_status", task_id="task_1", status="archived"),
        bad_json,
        tool_call("create_task", user_id="user_1", title="Prepare slides"),
        text("Created."),
    )
    with LoopbackOpenAI(agent) as server:
        proc, out = run_runner(runner_dir, request_for(task), server.env())
    assert proc.returncode == 0, proc.stderr
    errors = [json.loads(m["content"]) for m in out["messages"] if m["role"] == "tool"][:4]
    assert all("error" in e for e in errors)
    assert "not found" in errors[0]["error"] and "unknown tool" in errors[1]["error"]
    assert "invalid status" in errors[2]["error"] and "not valid JSON" in errors[3]["error"]
    assert out["tool_errors"] == 4 and out["tool_calls"] == 5
    assert out["termination"] == "user_stop" and out["user_stop_reason"] == "goal_met"


def test_several_tool_calls_in_one_message(runner_dir: Path, resolved_tasks):
    task = resolved_tasks["update_two_tasks"]
    both = {
        "content": None,
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {
                    "name": "update_task_status",
                    "arguments": json.dumps({"task_id": "task_4", "status": "completed"}),
                },
            },
            {
                "id": "b",
                "type": "function",
                "function": {
                    "name": "update_task_status",
                    "arguments": {"task_id": "task_3", "status": "completed"},
                },
            },
        ],
    }
    with LoopbackOpenAI(scripted(both, text("Both done."))) as server:
        proc, out = run_runner(runner_dir, request_for(task), server.env())
    assert proc.returncode == 0, proc.stderr
    assert [m.get("tool_call_id") for m in out["messages"] if m["role"] == "tool"] == ["a", "b"]
    assert db_equal(out["final_db"], replay(task["initial_db"], task["golden_actions"]).db)


def test_mock_policy_run_is_deterministic(runner_dir: Path, resolved_tasks):
    task = resolved_tasks["multi_create_and_update"]
    outs = []
    for _ in range(2):
        with LoopbackOpenAI(MockPolicy()) as server:
            proc, out = run_runner(runner_dir, request_for(task), server.env())
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    assert outs[0] == outs[1]
    assert db_equal(outs[0]["final_db"], replay(task["initial_db"], task["golden_actions"]).db)


# -- failures of the model endpoint --------------------------------------------------------------


def test_http_500_is_retried_once_then_fails(runner_dir: Path, resolved_tasks):
    with LoopbackOpenAI(lambda body: (500, {"error": {"message": "upstream exploded"}})) as server:
        proc, out = run_runner(runner_dir, request_for(resolved_tasks["create_basic"]), server.env())
    assert proc.returncode == 3 and out is None
    assert "HTTP 500" in proc.stderr and "upstream exploded" in proc.stderr
    assert "after 2 attempts" in proc.stderr
    assert len(server.requests) == 2
    assert "Traceback" not in proc.stderr


def test_one_500_then_success(runner_dir: Path, resolved_tasks):
    task = resolved_tasks["create_basic"]
    with LoopbackOpenAI(scripted((503, {"error": "busy"}), *golden_agent_steps(task))) as server:
        proc, out = run_runner(runner_dir, request_for(task), server.env())
    assert proc.returncode == 0, proc.stderr
    assert db_equal(out["final_db"], replay(task["initial_db"], task["golden_actions"]).db)


def golden_agent_steps(task):
    return [*(tool_call(a["name"], **a["arguments"]) for a in task["golden_actions"]), text("ok")]


def test_http_401_fails_without_retry_and_without_leaking_the_key(runner_dir: Path, resolved_tasks):
    with LoopbackOpenAI(scripted(), api_key="the-right-key") as server:
        env = {**server.env(), "OPENAI_API_KEY": "wrong-key-xyz"}
        proc, out = run_runner(runner_dir, request_for(resolved_tasks["create_basic"]), env)
    assert proc.returncode == 3 and out is None
    assert "HTTP 401" in proc.stderr and "invalid api key" in proc.stderr
    assert "wrong-key-xyz" not in proc.stderr + proc.stdout
    assert len(server.requests) == 1


def test_unreachable_endpoint(runner_dir: Path, resolved_tasks):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "k", "AGENTCOMPASS_MODEL": "m"}
    proc, out = run_runner(runner_dir, request_for(resolved_tasks["create_basic"]), env)
    assert proc.returncode == 3 and out is None
    assert "cannot reach the model endpoint" in proc.stderr


def test_invalid_completion(runner_dir: Path, resolved_tasks):
    with LoopbackOpenAI(lambda body: (200, b"not json at all")) as server:
        proc, _out = run_runner(runner_dir, request_for(resolved_tasks["create_basic"]), server.env())
    assert proc.returncode == 3 and "invalid chat completion" in proc.stderr


def test_request_overrides_the_endpoint_and_model(runner_dir: Path, resolved_tasks):
    task = resolved_tasks["create_basic"]
    with LoopbackOpenAI(golden_agent(task)) as server:
        env = {**server.env("env-model"), "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
        req = request_for(task, base_url=server.base_url, model="override-model")
        proc, _out = run_runner(runner_dir, req, env)
    assert proc.returncode == 0, proc.stderr
    assert {r["model"] for r in server.requests} == {"override-model"}


def test_missing_endpoint_is_a_usage_failure(runner_dir: Path, resolved_tasks):
    proc, out = run_runner(runner_dir, request_for(resolved_tasks["create_basic"]), {})
    assert proc.returncode == 2 and "OPENAI_BASE_URL" in proc.stderr and out is None


@pytest.mark.parametrize(
    ("request_obj", "fragment"),
    [
        ({"task_id": "no_such_task"}, "unknown task_id"),
        ({"task": {"user": {}}}, "initial_db"),
        ({"task_id": "create_basic", "max_turns": 0}, "max_turns"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_requests(runner_dir: Path, request_obj, fragment):
    proc, out = run_runner(runner_dir, request_obj, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert proc.returncode == 2 and fragment in proc.stderr and out is None


def test_request_with_only_a_task_id_uses_the_packaged_task(runner_dir: Path, resolved_tasks):
    task = resolved_tasks["create_basic"]
    with LoopbackOpenAI(golden_agent(task)) as server:
        proc, out = run_runner(runner_dir, {"task_id": "create_basic"}, server.env())
    assert proc.returncode == 0, proc.stderr
    assert db_equal(out["final_db"], replay(task["initial_db"], task["golden_actions"]).db)


def test_a_stale_result_is_removed_before_a_failing_run(runner_dir: Path, resolved_tasks):
    (runner_dir / "io").mkdir()
    (runner_dir / "io" / "result.json").write_text('{"final_db": "stale"}')
    with LoopbackOpenAI(lambda body: (500, {"error": "down"})) as server:
        proc, out = run_runner(runner_dir, request_for(resolved_tasks["create_basic"]), server.env())
    assert proc.returncode == 3 and out is None


def test_oracle_replays_the_golden_actions(runner_dir: Path, resolved_tasks):
    for task in resolved_tasks.values():
        proc, out = run_runner(runner_dir, request_for(task), {}, command="oracle")
        assert proc.returncode == 0, proc.stderr
        golden = replay(task["initial_db"], task["golden_actions"])
        assert db_equal(out["final_db"], golden.db), task["id"]
        assert out["tool_errors"] == 0
