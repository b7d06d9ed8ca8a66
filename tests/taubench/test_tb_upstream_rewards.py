"""The runner's evaluator against tau2-bench's on the same conversations.

``snapshots/upstream_rewards.json`` holds what ``tau2.evaluator.evaluator.evaluate_simulation`` (``ALL``, as
``tau2 run`` scores) gave for ~970 conversations that ``tb_variants.variants`` plays with the runner: per task
of the three domains the oracle, the gold path told by a scripted agent and user, with a wrong argument in its
last write, without its last write, without the final message, and cut short by max_steps. NL assertions were
judged by ``tb_variants.fake_judge`` on tau2's own judge prompt, whose digest is recorded as well.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import tb_support
from taubench_runner.evaluator import EvaluationError, judge_messages
from taubench_runner.llm import to_api_messages

SAMPLE = {"mock": None, "airline": ("0", "3", "14", "23", "44"), "retail": ("0", "2", "16", "24", "64", "105")}


def _compare(domain: str, task_ids) -> int:  # type: ignore[no-untyped-def]
    expected = json.loads(tb_support.REWARDS_SNAPSHOT.read_text())["rewards"]
    n = 0
    for task_id, task in tb_support.tasks(domain).items():
        if task_ids is not None and task_id not in task_ids:
            continue
        for name, trajectory in tb_support.variants(domain, task).items():
            want = expected[f"{domain}/{task_id}/{name}"]
            prompts: list[str] = []

            def judge(messages, prompts=prompts):  # type: ignore[no-untyped-def]
                prompts.append(hashlib.sha256(json.dumps(to_api_messages(messages)).encode()).hexdigest())
                return tb_support.fake_judge(messages)

            if "error" in want:  # upstream's evaluator fails on it: so does the runner's (EVAL_ERROR)
                with pytest.raises(EvaluationError):
                    tb_support.score(domain, task, trajectory, judge=judge)
                n += 1
                continue
            got = tb_support.score(domain, task, trajectory, judge=judge)
            assert (got["reward"], got.get("reward_breakdown") or {}) == (want["reward"], want["reward_breakdown"]), \
                (domain, task_id, name)
            if want["db_match"] is not None and got.get("db_check"):
                assert got["db_check"]["db_match"] == want["db_match"], (domain, task_id, name)
            assert prompts == want["judge_prompts"], (domain, task_id, name)
            n += 1
    return n


@pytest.mark.parametrize("domain", tb_support.DOMAINS)
def test_sampled_conversations_score_as_upstream(domain: str):
    assert _compare(domain, SAMPLE[domain]) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("domain", ("airline", "retail"))
def test_every_conversation_scores_as_upstream(domain: str):
    assert _compare(domain, None) > 200


def test_the_judge_sees_upstreams_prompt():
    """The two messages of the judge call, for a task with NL assertions (their digest is checked above)."""
    task = tb_support.tasks("retail")["2"]
    trajectory = tb_support.oracle("retail", task)
    system, user = judge_messages(trajectory["messages"], task["evaluation_criteria"]["nl_assertions"])
    assert system["role"] == "system" and system["content"].startswith("\n        TASK\n        - You will be given")
    assert user["content"].startswith("\n        conversation:\n        assistant: Hi! How can I help you today?\n")
    assert "tool: " in user["content"] and "assistant: None" in user["content"]  # tool messages and calls too
    assert user["content"].endswith(f"expectedOutcomes:\n        {task['evaluation_criteria']['nl_assertions']}\n        ")
