"""The evaluator's components, one by one, on small tasks and conversations."""

from __future__ import annotations

import copy
import json

import pytest
import tb_support as s
from taubench_runner.evaluator import EvaluationError, action_matches, communicate_component, evaluate


def mock_task(**criteria):  # type: ignore[no-untyped-def]
    base = copy.deepcopy(s.tasks("mock")["create_task_1"])
    base["evaluation_criteria"] = criteria
    return base


def trajectory(*messages, reason="user_stop"):  # type: ignore[no-untyped-def]
    return {"termination_reason": reason, "messages": list(messages)}


def agent_call(name, call_id="c1", requestor="assistant", **arguments):  # type: ignore[no-untyped-def]
    return {"role": "assistant" if requestor == "assistant" else "user", "content": None,
            "tool_calls": [{"id": call_id, "name": name, "arguments": arguments, "requestor": requestor}]}


def result(content, call_id="c1", requestor="assistant", error=False):  # type: ignore[no-untyped-def]
    return {"role": "tool", "id": call_id, "content": content, "requestor": requestor, "error": error}


def say(text, role="assistant"):  # type: ignore[no-untyped-def]
    return {"role": role, "content": text, "tool_calls": None}


CREATE = {"action_id": "a", "name": "create_task", "arguments": {"user_id": "user_1", "title": "Important Meeting"}}
CREATED = json.dumps({"task_id": "task_2", "title": "Important Meeting", "description": None, "status": "pending"})


def evaluate_mock(task, traj, **options):  # type: ignore[no-untyped-def]
    return evaluate(task, traj, s.domain_data("mock"), **options)


def test_only_a_stop_is_scored():
    task = mock_task(actions=[CREATE])
    for reason in ("max_steps", "too_many_errors", "agent_error", "user_error"):
        out = evaluate_mock(task, trajectory(reason=reason))
        assert out["reward"] == 0.0 and out["components"] == {}
        assert out["info"]["note"] == f"Simulation terminated prematurely. Termination reason: {reason}"
    assert evaluate_mock(task, trajectory(reason="agent_stop"))["reward_basis"] == ["DB", "COMMUNICATE"]


def test_no_criteria_scores_one():
    task = mock_task()
    task["evaluation_criteria"] = None
    assert evaluate_mock(task, trajectory())["reward"] == 1.0


def test_db_replays_writes_and_compares_with_the_gold_state():
    task = mock_task(actions=[CREATE], reward_basis=["DB"])
    good = trajectory(say("Hi"), agent_call("create_task", user_id="user_1", title="Important Meeting"),
                      result(CREATED), say("Done"))
    out = evaluate_mock(task, good)
    assert out["reward"] == 1.0 and out["db_check"] == {"db_match": True, "db_reward": 1.0}
    assert out["db_hashes"]["predicted_agent"] == out["db_hashes"]["gold_agent"]
    wrong_content = json.dumps({"task_id": "task_2", "title": "Meeting", "description": None, "status": "pending"})
    wrong = trajectory(agent_call("create_task", user_id="user_1", title="Meeting"), result(wrong_content))
    assert evaluate_mock(task, wrong)["reward"] == 0.0
    # reads and unknown tools are not replayed; a replayed write must reproduce its recorded result
    noise = trajectory(agent_call("get_users"), result("whatever"), agent_call("nope", "c2"), result("x", "c2"),
                       agent_call("create_task", "c3", user_id="user_1", title="Important Meeting"),
                       result(CREATED, "c3"))
    assert evaluate_mock(task, noise)["reward"] == 1.0
    tampered = trajectory(agent_call("create_task", user_id="user_1", title="Important Meeting"), result("forged"))
    with pytest.raises(EvaluationError, match="replaying the trajectory failed"):
        evaluate_mock(task, tampered)


def test_db_compares_the_user_side_too():
    task = mock_task(actions=[CREATE], reward_basis=["DB"])
    user_write = trajectory(
        agent_call("create_task", user_id="user_1", title="Important Meeting"), result(CREATED),
        agent_call("dismiss_notification", "u1", "user", notification_id="notif_1"),
        result("Notification notif_1 dismissed", "u1", "user"),
    )
    out = evaluate_mock(task, user_write)
    assert out["db_hashes"]["predicted_agent"] == out["db_hashes"]["gold_agent"]
    assert out["db_hashes"]["predicted_user"] != out["db_hashes"]["gold_user"]
    assert out["reward"] == 0.0


def test_env_assertions_run_on_the_replayed_environment():
    assertion = {"env_type": "assistant", "func_name": "assert_task_status",
                 "arguments": {"task_id": "task_1", "expected_status": "completed"}}
    task = mock_task(actions=[], env_assertions=[assertion], reward_basis=["ENV_ASSERTION"])
    done = trajectory(agent_call("update_task_status", task_id="task_1", status="completed"),
                      result(json.dumps({"task_id": "task_1", "title": "Test task", "description": "A test task",
                                         "status": "completed"})))
    assert evaluate_mock(task, done)["reward"] == 1.0
    out = evaluate_mock(task, trajectory(say("no")))
    assert out["reward"] == 0.0 and out["env_assertions"][0]["met"] is False
    negated = mock_task(actions=[], env_assertions=[{**assertion, "assert_value": False}],
                        reward_basis=["ENV_ASSERTION"])
    assert evaluate_mock(negated, trajectory(say("no")))["reward"] == 1.0
    missing = mock_task(actions=[], env_assertions=[{**assertion, "arguments": {"task_id": "task_9",
                                                                               "expected_status": "pending"}}])
    with pytest.raises(EvaluationError, match="Task task_9 not found"):  # upstream's evaluator raises too
        evaluate_mock(missing, trajectory(say("no")))


def test_action_matching_follows_compare_args():
    gold = {"name": "f", "arguments": {"a": 1, "b": 2}, "compare_args": None}
    assert action_matches(gold, {"name": "f", "arguments": {"a": 1, "b": 2}})
    assert action_matches(gold, {"name": "f", "arguments": {"a": 1}})  # only the call's own keys are compared
    assert not action_matches(gold, {"name": "f", "arguments": {"a": 1, "b": 2, "c": 3}})
    assert not action_matches(gold, {"name": "g", "arguments": {"a": 1, "b": 2}})
    assert action_matches({**gold, "compare_args": ["a"]}, {"name": "f", "arguments": {"a": 1, "b": 9}})
    assert action_matches({**gold, "compare_args": []}, {"name": "f", "arguments": {"z": 0}})
    task = mock_task(actions=[{**CREATE, "compare_args": ["title"]}], reward_basis=["ACTION"])
    called = trajectory(agent_call("create_task", user_id="someone", title="Important Meeting"),
                        result("Error: User someone not found", error=True))
    out = evaluate_mock(task, called)
    assert out["reward"] == 1.0 and out["action_checks"][0]["tool_type"] == "write"
    assert evaluate_mock(task, trajectory(say("hello")))["reward"] == 0.0


def test_communicate_is_a_case_insensitive_substring_of_an_agent_message_without_commas():
    task = mock_task(communicate_info=["1000", "Gold Card"])
    said = [say("Your refund is 1,000 dollars and your gold card is ready.")]
    assert communicate_component(task, said)["reward"] == 1.0
    assert communicate_component(task, [say("1000 and GOLD CARD", role="user")])["reward"] == 0.0
    with_comma = mock_task(communicate_info=["1,000"])  # upstream's quirk: can never match
    assert communicate_component(with_comma, [say("1,000")])["reward"] == 0.0
    checks = communicate_component(task, [say("nothing")])["communicate_checks"]
    assert checks[0] == {"info": "1000", "met": False, "justification": "Information '1000' not communicated."}


def test_the_reward_is_the_product_over_the_basis_only():
    task = mock_task(actions=[CREATE], communicate_info=["zebra"], reward_basis=["DB"])
    good = trajectory(agent_call("create_task", user_id="user_1", title="Important Meeting"), result(CREATED))
    out = evaluate_mock(task, good)
    assert out["reward"] == 1.0 and out["components"]["COMMUNICATE"] == 0.0  # computed, not in the basis
    assert out["reward_breakdown"] == {"DB": 1.0}
    task["evaluation_criteria"]["reward_basis"] = ["DB", "COMMUNICATE"]
    assert evaluate_mock(task, good)["reward"] == 0.0


def test_nl_assertions_are_judged_only_in_the_basis():
    task = mock_task(nl_assertions=["The agent greeted the user"], reward_basis=["NL_ASSERTION"])
    calls = []

    def judge(messages):  # type: ignore[no-untyped-def]
        calls.append(messages)
        return json.dumps({"results": [{"expectedOutcome": "The agent greeted the user", "reasoning": "yes",
                                        "metExpectation": "true"}]})

    out = evaluate_mock(task, trajectory(say("Hello!")), judge=judge)
    assert out["reward"] == 1.0 and out["nl_assertions"][0]["met"] is True and len(calls) == 1
    assert [m["role"] for m in calls[0]] == ["system", "user"]
    skipped = evaluate_mock(task, trajectory(say("Hello!")), skip_nl="oracle")
    assert skipped["reward"] == 1.0 and "NL_ASSERTION" not in skipped["components"]
    assert skipped["info"]["nl_skipped"] == "oracle"
    with pytest.raises(EvaluationError, match="not the expected JSON"):
        evaluate_mock(task, trajectory(say("Hello!")), judge=lambda m: "```json\n{}```")
    with pytest.raises(EvaluationError, match="need a judge"):
        evaluate_mock(task, trajectory(say("Hello!")))
    not_in_basis = mock_task(nl_assertions=["x"], reward_basis=["DB"])
    assert "NL_ASSERTION" not in evaluate_mock(not_in_basis, trajectory(say("Hello!")), judge=judge)["components"]
    assert len(calls) == 1
