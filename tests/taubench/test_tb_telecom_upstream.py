"""Telecom, compared with tau2-bench's own values.

``snapshots/upstream_telecom.json`` was produced by ``upstream/derive_telecom.py`` running tau2-bench (commit
a2c0247, pydantic 2.12.4) on this package's telecom data: every agent and user tool's schema as
``Tool.openai_schema`` renders it, the agent's system prompt (upstream's ``telecom`` policy: the main policy and
the tech-support manual), each task's user simulator prompt, the database hashes of both sides, the result of
every call of ``tb_telecom.sequences`` (every tool, reads and writes, bad arguments, each gold action by its
requestor) and upstream's ``evaluate_simulation`` of every conversation of ``tb_telecom.variants``.
"""

from __future__ import annotations

import functools
import hashlib
import json

import pytest
import tb_fuzz
import tb_support
import tb_telecom
from agentcompass.testing import LoopbackOpenAI
from taubench_runner import prompts
from taubench_runner import tasks as task_fields
from taubench_runner.domains import DomainData
from taubench_runner.evaluator import gold_environment
from taubench_runner.prompts import STOP

SNAPSHOT = tb_support.SNAPSHOTS / "upstream_telecom.json"
TASK_IDS = list(tb_telecom.tasks("telecom"))


@functools.cache
def upstream() -> dict:
    return json.loads(SNAPSHOT.read_text())  # type: ignore[no-any-return]


def test_the_snapshot_covers_every_task_and_tool():
    snap = upstream()
    assert list(snap["tasks"]) == TASK_IDS and len(TASK_IDS) == 20
    env = tb_support.environment("telecom")
    assert len(snap["agent_tools"]) == len(env.get_tools()) == 13
    assert len(snap["user_tools"]) == len(env.get_user_tools() or ()) == 30
    called = {c["name"] for _, calls in tb_telecom.sequences(tb_telecom.tasks_raw()) for c in calls}
    assert {t["function"]["name"] for t in snap["agent_tools"] + snap["user_tools"]} <= called


def test_tool_schemas_are_upstreams_byte_for_byte():
    env = tb_support.environment("telecom")
    snap = upstream()
    # json.dumps without sort_keys: the order of keys (what the model reads) must be upstream's too
    assert json.dumps([t.openai_schema() for t in env.get_tools()]) == json.dumps(snap["agent_tools"])
    assert json.dumps([t.openai_schema() for t in env.get_user_tools() or ()]) == json.dumps(snap["user_tools"])
    assert {n: s.mutates for n, s in env.tools.tool_specs.items()} == snap["mutating"]
    assert env.user_tools is not None
    assert {n: s.mutates for n, s in env.user_tools.tool_specs.items()} == snap["user_mutating"]


def test_system_prompts_are_upstreams():
    env = tb_support.environment("telecom")
    snap = upstream()
    assert prompts.agent_system_prompt(env.policy) == snap["agent_system_prompt"]
    assert "<main_policy>\n" in env.policy and "<tech_support_policy>\n" in env.policy
    guidelines = (tb_support.ROOT / "user_simulator" / "simulation_guidelines_tools.md").read_text()
    for task_id, task in tb_telecom.tasks("telecom").items():
        assert snap["tasks"][task_id]["user_has_tools"] is True
        assert env.get_user_tools(task.get("user_tools"))
        prompt = prompts.user_system_prompt(guidelines, task_fields.scenario_text(task))
        assert hashlib.sha256(prompt.encode()).hexdigest() == snap["tasks"][task_id]["user_system_prompt"], task_id


def test_databases_hash_as_upstreams():
    env = tb_support.environment("telecom")
    assert (env.get_db_hash(), env.get_user_db_hash()) == (upstream()["initial_db_hash"],
                                                           upstream()["initial_user_db_hash"])
    checked = 0
    for task_id, task in tb_telecom.tasks("telecom").items():
        want = upstream()["tasks"][task_id]
        tb_telecom.fresh_vpn_default()
        gold, _ = gold_environment(task, tb_support.domain_data("telecom"))
        if want["gold_db_hash"] is not None:
            assert gold.get_db_hash() == want["gold_db_hash"], task_id
            checked += 1
        assert gold.get_user_db_hash() == want["gold_user_db_hash"], task_id
    assert checked >= 18


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_every_call_answers_as_upstream(task_id: str):
    """The result text (and error flag) of every call of the task's sequence, and both sides' state after."""
    want = upstream()["tasks"][task_id]
    assert want["fuzz"] is not None
    task = tb_telecom.tasks("telecom")[task_id]
    calls = dict(tb_telecom.sequences([task]))[task_id]
    tb_telecom.fresh_vpn_default()
    env = tb_support.environment("telecom", task)
    mismatches = []
    for call, expected in zip(calls, want["fuzz"], strict=True):
        got = tb_fuzz.record(env.get_response(call))
        if got[:2] != expected[:2]:
            mismatches.append((call["name"], call["arguments"], expected[2], got[2]))
    assert not mismatches, mismatches[:3]
    assert (env.get_db_hash(), env.get_user_db_hash()) == (want["fuzz_db_hash"], want["fuzz_user_db_hash"])
    assert len(calls) > 100


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_every_conversation_scores_as_upstream(task_id: str):
    """The oracle, the last user action made wrong or left out, the last agent write left out, max_steps."""
    want = upstream()["tasks"][task_id]["rewards"]
    task = tb_telecom.tasks("telecom")[task_id]
    variants = tb_telecom.variants(task)
    assert set(variants) == set(want)
    for name, trajectory in variants.items():
        tb_telecom.fresh_vpn_default()
        got = tb_support.score("telecom", task, trajectory)
        assert (got["reward"], got.get("reward_breakdown") or {}) == (want[name]["reward"],
                                                                       want[name]["reward_breakdown"]), name
        if want[name]["db_match"] is not None:
            assert got["db_check"]["db_match"] == want[name]["db_match"], name
        assert [c["met"] for c in got.get("env_assertions") or ()] == want[name]["env_assertions"], name
    assert want["oracle"]["reward"] == 1.0
    assert all(v["reward"] == 0.0 for k, v in want.items() if k != "oracle")


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_every_task_function_behaves_as_upstreams(task_id: str):
    """The initialization actions and assertions (functions that are not tools), on both sides, from the
    task's initial state: each result (or error), and both sides' state after them."""
    want = upstream()["tasks"][task_id]
    task = tb_telecom.tasks("telecom")[task_id]
    tb_telecom.fresh_vpn_default()
    env = tb_support.environment("telecom", task)
    assert env.user_tools is not None
    got = [tb_telecom.outcome(lambda c=c: env.run_env_function_call(c)) for c in tb_telecom.env_calls()]
    mismatches = [(c["func_name"], c["arguments"], w, g)
                  for c, w, g in zip(tb_telecom.env_calls(), want["env_calls"], got, strict=True) if w != g]
    assert not mismatches, mismatches[:3]
    assert (env.get_db_hash(), env.get_user_db_hash()) == (want["env_calls_db_hash"],
                                                           want["env_calls_user_db_hash"])
    assert {c["func_name"] for c in tb_telecom.env_calls()} >= {
        a["func_name"] for t in tb_telecom.tasks_raw() for a in [
            *((t.get("initial_state") or {}).get("initialization_actions") or ()),
            *(t["evaluation_criteria"].get("env_assertions") or ())]
    } - set(env.tools.tool_specs) - set(env.user_tools.tool_specs)  # tools: compared with the tools


def test_the_workflow_variant_is_upstreams_telecom_workflow(tmp_path):  # type: ignore[no-untyped-def]
    """``-b policy=workflow``: the agent's system prompt of upstream's ``telecom-workflow`` domain, as the runner
    sends it."""
    data = DomainData.load("telecom", str(tb_support.ROOT / "domains" / "telecom"), policy_variant="workflow")
    assert prompts.agent_system_prompt(data.policy) == upstream()["agent_system_prompt_workflow"]
    assert upstream()["agent_system_prompt_workflow"] != upstream()["agent_system_prompt"]
    requests: list[dict] = []

    def respond(body: dict) -> dict:
        requests.append(body)
        return {"content": STOP}

    task = tb_telecom.tasks("telecom")[TASK_IDS[0]]
    with LoopbackOpenAI(respond) as server:
        proc, out = tb_support.run_runner(tmp_path, "run", tb_support.request_for("telecom", task, policy="workflow"),
                                          env=server.env())
        assert proc.returncode == 0, proc.stderr
        bad, _ = tb_support.run_runner(tmp_path, "run", tb_support.request_for("telecom", task, policy="nope"),
                                       env=server.env())
    assert out["termination_reason"] == "user_stop"
    assert bad.returncode == 2 and "domain 'telecom' has no policy variant 'nope'; variants: manual, workflow" in \
        bad.stderr
    # the user stopped at once: the agent was never asked; ask it directly through a second conversation
    agent_first = tb_support.request_for("telecom", {**task, "initial_state": {
        **task["initial_state"], "message_history": [{"role": "user", "content": "My phone has no service."}]}},
        policy="workflow")
    requests.clear()
    with LoopbackOpenAI(respond) as server:
        tb_support.run_runner(tmp_path, "run", agent_first, env=server.env())
    agent_calls = [r for r in requests if r["model"] == "agent-model"]
    assert agent_calls and agent_calls[0]["messages"][0]["content"] == upstream()["agent_system_prompt_workflow"]
