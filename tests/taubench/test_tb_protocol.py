"""tau2's orchestration protocol, through the runner as a subprocess talking to a loopback OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tb_support as s
from agentcompass.testing import LoopbackOpenAI, text, tool_call
from taubench_runner import prompts
from taubench_runner import tasks as task_fields

RETAIL = s.tasks("retail")["0"]


class Roles:
    """A responder playing the agent and the user from two scripts (lists of answers, then a default)."""

    def __init__(self, agent: list[Any], user: list[Any], *, agent_then: Any = None, user_then: Any = None) -> None:
        self.agent, self.user = list(agent), list(user)
        self.agent_then = agent_then or text("Anything else?")
        self.user_then = user_then or text(prompts.STOP)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        self.requests.append(body)
        if body["model"] == "user-model":
            return self.user.pop(0) if self.user else self.user_then
        return self.agent.pop(0) if self.agent else self.agent_then

    def of(self, model: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["model"] == model]


def run(tmp_path: Path, roles: Roles, task: dict[str, Any] = RETAIL, domain: str = "retail", **fields: Any):
    with LoopbackOpenAI(roles) as server:
        request = s.request_for(domain, task, **fields)
        return s.run_runner(tmp_path, "run", request, env=server.env())


def test_the_agent_speaks_first_and_sees_upstreams_prompt_and_tools(tmp_path: Path):
    roles = Roles([text("Sure, what is your name?")], [text("I want an exchange."), text(prompts.STOP)])
    proc, out = run(tmp_path, roles, agent={"model": "agent-model", "params": {"temperature": 0.0}})
    assert proc.returncode == 0, proc.stderr
    assert out["termination_reason"] == "user_stop"
    roles_in_order = [(m["role"], m["content"]) for m in out["messages"]]
    assert roles_in_order == [("assistant", prompts.FIRST_AGENT_MESSAGE), ("user", "I want an exchange."),
                              ("assistant", "Sure, what is your name?"), ("user", prompts.STOP)]
    first_user, first_agent = roles.of("user-model")[0], roles.of("agent-model")[0]
    assert first_agent["messages"][0] == {"role": "system", "content": prompts.agent_system_prompt(
        (s.ROOT / "domains" / "retail" / "policy.md").read_text())}
    assert first_agent["messages"][1:] == [{"role": "assistant", "content": prompts.FIRST_AGENT_MESSAGE},
                                           {"role": "user", "content": "I want an exchange."}]
    assert first_agent["tools"] == [t.openai_schema() for t in s.environment("retail").get_tools()]
    assert first_agent["tool_choice"] == "auto" and first_agent["temperature"] == 0.0
    # the user: guidelines without tools (retail has no user tools) and the scenario; the agent's greeting as
    # the user's message; no tools offered
    guidelines = (s.ROOT / "user_simulator" / "simulation_guidelines.md").read_text()
    assert first_user["messages"] == [
        {"role": "system", "content": prompts.user_system_prompt(guidelines, task_fields.scenario_text(RETAIL))},
        {"role": "user", "content": prompts.FIRST_AGENT_MESSAGE},
    ]
    assert "tools" not in first_user and "tool_choice" not in first_user


def test_tool_results_go_back_to_the_agent_and_the_user_never_sees_them(tmp_path: Path):
    roles = Roles(
        [tool_call("find_user_id_by_email", email="nobody@example.com"),
         {"content": None, "tool_calls": [
             {"id": "a", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "1+1"}'}},
             {"id": "b", "type": "function", "function": {"name": "get_item_details",
                                                         "arguments": '{"item_id": "4107812777"}'}}]},
         text("Your user is not found.")],
        [text("Find me."), text(prompts.STOP)],
    )
    proc, out = run(tmp_path, roles)
    assert proc.returncode == 0, proc.stderr
    tools = [m for m in out["messages"] if m["role"] == "tool"]
    assert [(t["id"], t["error"]) for t in tools] == [("call_1", True), ("a", False), ("b", False)]
    assert tools[0]["content"] == "Error: User not found"
    assert out["num_errors"] == 1
    last_agent = roles.of("agent-model")[-1]["messages"]
    assert [m["role"] for m in last_agent[-3:]] == ["assistant", "tool", "tool"]
    assert last_agent[-2] == {"role": "tool", "content": "2.0", "tool_call_id": "a"}
    assert json.loads(last_agent[-5]["tool_calls"][0]["function"]["arguments"]) == {"email": "nobody@example.com"}
    second_user = roles.of("user-model")[1]["messages"]
    assert [m["role"] for m in second_user] == ["system", "user", "assistant", "user"]
    assert second_user[-1]["content"] == "Your user is not found."


@pytest.mark.parametrize("token", [prompts.STOP, prompts.TRANSFER, prompts.OUT_OF_SCOPE])
def test_every_stop_token_ends_the_conversation(tmp_path: Path, token: str):
    proc, out = run(tmp_path, Roles([], [text(f"Thanks. {token}")]))
    assert proc.returncode == 0, proc.stderr
    assert out["termination_reason"] == "user_stop" and out["messages"][-1]["content"] == f"Thanks. {token}"


def test_max_steps_counts_every_message_after_the_greeting(tmp_path: Path):
    roles = Roles([tool_call("calculate", expression="1+1")], [text("hi")], agent_then=text("ok"),
                  user_then=text("more"))
    proc, out = run(tmp_path, roles, max_steps=4)
    assert proc.returncode == 0, proc.stderr
    # greeting, then: user (1), agent tool call (2, no check while the environment has to answer), tool
    # result (3), agent text (4): stop
    assert out["termination_reason"] == "max_steps" and out["steps"] == 4
    assert [m["role"] for m in out["messages"]] == ["assistant", "user", "assistant", "tool", "assistant"]
    # max_steps=2 is reached at the agent's tool call, but the conversation ends only after its result
    proc, out = run(tmp_path, Roles([tool_call("calculate", expression="1+1")], [text("hi")]), max_steps=2)
    assert out["termination_reason"] == "max_steps" and out["steps"] == 3
    assert out["messages"][-1]["role"] == "tool"


def test_max_errors_ends_with_too_many_errors(tmp_path: Path):
    roles = Roles([], [text("hi")], agent_then=tool_call("get_user_details", user_id="nobody"))
    proc, out = run(tmp_path, roles, max_errors=3)
    assert proc.returncode == 0, proc.stderr
    assert out["termination_reason"] == "too_many_errors" and out["num_errors"] == 3


def test_text_with_tool_calls_goes_to_the_environment_unless_the_protocol_is_enforced(tmp_path: Path):
    both = {"content": "Let me check.", "tool_calls": tool_call("calculate", expression="2*3")["tool_calls"]}
    proc, out = run(tmp_path, Roles([both], [text("hi")]))
    assert proc.returncode == 0, proc.stderr
    assert out["messages"][2]["content"] == "Let me check." and out["messages"][3]["role"] == "tool"
    proc, out = run(tmp_path, Roles([both], [text("hi")]), enforce_communication_protocol=True)
    assert out["termination_reason"] == "agent_error"


def test_a_task_with_history_resumes_it(tmp_path: Path):
    task = s.tasks("mock")["update_task_with_message_history"]
    roles = Roles([text("Done.")], [text("Mark it completed."), text(prompts.STOP)])
    proc, out = run(tmp_path, roles, task=task, domain="mock")
    assert proc.returncode == 0, proc.stderr
    history = task_fields.message_history(task)
    assert [m["role"] for m in out["messages"][:len(history)]] == [m["role"] for m in history]
    assert out["messages"][0]["content"] != prompts.FIRST_AGENT_MESSAGE
    first_user = roles.of("user-model")[0]["messages"]
    # the user saw its own message and the agent's text, never the agent's tool call or its result
    assert [m["role"] for m in first_user] == ["system", "assistant", "user"]
    first_agent = roles.of("agent-model")[0]["messages"]
    assert [m["role"] for m in first_agent] == ["system", "user", "assistant", "tool", "assistant", "user"]


def test_the_user_is_offered_its_own_tools_and_gets_their_results(tmp_path: Path):
    task = s.tasks("mock")["update_task_with_user_tools"]
    user_call = tool_call("check_notifications", call_id="u1")
    roles = Roles([text("Done, it is completed.")], [user_call, text("Please complete task_1."), text(prompts.STOP)])
    proc, out = run(tmp_path, roles, task=task, domain="mock")
    assert proc.returncode == 0, proc.stderr
    first_user = roles.of("user-model")[0]
    assert [t["function"]["name"] for t in first_user["tools"]] == ["check_notifications", "dismiss_notification"]
    assert first_user["messages"][0]["content"].startswith(
        (s.ROOT / "user_simulator" / "simulation_guidelines_tools.md").read_text())
    second_user = roles.of("user-model")[1]["messages"]
    assert second_user[-2]["tool_calls"][0]["function"]["name"] == "check_notifications"
    assert second_user[-1]["role"] == "tool" and "notif_1" in second_user[-1]["content"]
    tool_message = next(m for m in out["messages"] if m["role"] == "tool")
    assert tool_message["requestor"] == "user"
    assert all(m["role"] != "tool" for m in roles.of("agent-model")[0]["messages"])  # not the agent's business


def test_a_model_error_ends_the_runner_with_status_3_and_the_conversation_so_far(tmp_path: Path):
    def failing(body: dict[str, Any]) -> Any:
        if body["model"] == "user-model":
            return text("hi")
        return 400, {"error": {"message": "context too long"}}

    with LoopbackOpenAI(failing) as server:
        proc, out = s.run_runner(tmp_path, "run", s.request_for("retail", RETAIL), env=server.env())
    assert proc.returncode == 3
    assert "context too long" in proc.stderr
    assert out["termination_reason"] == "infrastructure_error" and "context too long" in out["error"]
    assert [m["role"] for m in out["messages"]] == ["assistant", "user"]


@pytest.mark.parametrize("answer", [
    {"content": None},
    {"content": "   "},
    {"content": None, "tool_calls": [{"id": "x", "type": "function",
                                      "function": {"name": "calculate", "arguments": "{not json"}}]},
])
def test_a_message_tau2_cannot_take_ends_the_runner_with_status_4(tmp_path: Path, answer: dict[str, Any]):
    proc, out = run(tmp_path, Roles([answer], [text("hi")]))
    assert proc.returncode == 4, proc.stderr
    assert "tau2 fails such a simulation" in proc.stderr
    assert out["error"] and out["termination_reason"] == "infrastructure_error"


def test_oracle_and_evaluate_commands(tmp_path: Path):
    task = s.tasks("airline")["14"]
    request = s.request_for("airline", task)
    proc, out = s.run_runner(tmp_path, "oracle", request)
    assert proc.returncode == 0, proc.stderr
    assert out["mode"] == "oracle" and out["model_calls"] == {} and out["termination_reason"] == "user_stop"
    proc, evaluation = s.run_runner(tmp_path, "evaluate", request, trajectory=tmp_path / "oracle.json")
    assert proc.returncode == 0, proc.stderr
    assert evaluation["reward"] == 1.0 and evaluation["reward_breakdown"] == {"DB": 1.0, "COMMUNICATE": 1.0}
    proc, _ = s.run_runner(tmp_path, "evaluate", request, trajectory=tmp_path / "missing.json")
    assert proc.returncode == 5 and "no trajectory" in proc.stderr
    proc, _ = s.run_runner(tmp_path, "oracle", {**request, "max_steps": 0})
    assert proc.returncode == 2 and "max_steps" in proc.stderr
