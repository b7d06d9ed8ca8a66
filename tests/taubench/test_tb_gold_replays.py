"""Every task of the three domains: its gold actions replayed through the runner's orchestrator (the oracle
participants) and scored by the runner's evaluator, as ``agentcompass run taubench oracle`` does."""

from __future__ import annotations

import pytest
import tb_support
from taubench_runner import tasks as task_fields

ALL_TASKS = [(d, t) for d in tb_support.DOMAINS for t in tb_support.tasks(d)]


@pytest.mark.slow
@pytest.mark.parametrize("domain", tb_support.DOMAINS)
def test_every_gold_replay_scores_as_listed(domain: str, upstream: dict):
    rewards = {}
    for task_id, task in tb_support.tasks(domain).items():
        trajectory = tb_support.oracle(domain, task)
        assert trajectory["termination_reason"] == "user_stop", task_id
        skip = "oracle" if task_fields.needs_judge(task) else None
        evaluation = tb_support.score(domain, task, trajectory, skip_nl=skip)
        rewards[f"{domain}/{task_id}"] = evaluation["reward"]
        # the gold environment the evaluator builds is upstream's, hash for hash
        expected = upstream["domains"][domain]["tasks"][task_id]
        if evaluation.get("db_hashes"):
            assert evaluation["db_hashes"]["gold_agent"] == expected["gold_db_hash"], task_id
            assert evaluation["db_hashes"]["gold_user"] == expected["gold_user_db_hash"], task_id
    expected_rewards = {k: 0.0 if k in tb_support.ORACLE_EXCEPTIONS else 1.0 for k in rewards}
    assert rewards == expected_rewards


def test_the_oracle_conversation_has_tau2s_shape():
    task = tb_support.tasks("retail")["0"]
    trajectory = tb_support.oracle("retail", task)
    messages = trajectory["messages"]
    assert messages[0] == {**messages[0], "role": "assistant", "content": "Hi! How can I help you today?"}
    assert messages[1]["role"] == "user"
    gold = task_fields.gold_actions(task)
    calls = [c for m in messages if m["role"] == "assistant" and m["tool_calls"] for c in m["tool_calls"]]
    assert [(c["name"], c["arguments"]) for c in calls] == [(a["name"], a["arguments"]) for a in gold]
    assert all(len(m["tool_calls"]) == 1 for m in messages if m["role"] == "assistant" and m["tool_calls"])
    assert messages[-1]["content"] == "###STOP###"
    # greeting and history are not steps: one step per message after the greeting
    assert trajectory["steps"] == len(messages) - 1
    assert [m["turn_idx"] for m in messages] == list(range(len(messages)))


def test_the_oracle_tells_what_the_task_expects_communicated():
    task = tb_support.tasks("airline")["14"]
    assert task["evaluation_criteria"]["communicate_info"] == ["327", "1000", "1786"]
    trajectory = tb_support.oracle("airline", task)
    final = [m for m in trajectory["messages"] if m["role"] == "assistant" and m["content"]][-1]["content"]
    assert all(info in final for info in ["327", "1000", "1786"])
    assert tb_support.score("airline", task, trajectory)["components"]["COMMUNICATE"] == 1.0


def test_the_two_mock_exceptions_fail_for_the_listed_reason():
    tasks = tb_support.tasks("mock")
    history = tb_support.score("mock", tasks["update_task_with_history_and_env_assertions"],
                               tb_support.oracle("mock", tasks["update_task_with_history_and_env_assertions"]))
    assert history["reward_breakdown"] == {"ENV_ASSERTION": 0.0}
    user_tools = tb_support.score("mock", tasks["update_task_with_user_tools"],
                                  tb_support.oracle("mock", tasks["update_task_with_user_tools"]))
    assert user_tools["reward_breakdown"] == {"DB": 1.0, "ACTION": 1.0, "ENV_ASSERTION": 0.0}
    assert user_tools["env_assertions"][0]["env_assertion"]["func_name"] == "assert_notification_status"
