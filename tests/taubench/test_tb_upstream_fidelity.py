"""What the models see and what the tools do, compared with tau2-bench's own values.

``snapshots/upstream.json`` was produced by ``upstream/derive_snapshot.py`` running tau2-bench (commit a2c0247,
pydantic 2.12.4, the version its lock file pins) on this package's data: every tool's schema as
``Tool.openai_schema`` renders it from the Python signature and docstring, the agent's system prompt, each
task's user simulator prompt, database hashes, and the result of ~8000 tool calls (the gold actions and
variants of them that fail in every way ``tb_fuzz`` knows).
"""

from __future__ import annotations

import hashlib
import json

import pytest
import tb_fuzz
import tb_support
from taubench_runner import prompts
from taubench_runner import tasks as task_fields
from taubench_runner.evaluator import gold_environment


@pytest.mark.parametrize("domain", tb_support.DOMAINS)
def test_tool_schemas_are_upstreams_byte_for_byte(domain: str, upstream: dict):
    env = tb_support.environment(domain)
    expected = upstream["domains"][domain]
    # json.dumps without sort_keys: the order of keys (what the model reads) must be upstream's too
    assert json.dumps([t.openai_schema() for t in env.get_tools()]) == json.dumps(expected["agent_tools"])
    user_tools = env.get_user_tools()
    assert json.dumps([t.openai_schema() for t in user_tools] if user_tools is not None else None) == \
        json.dumps(expected["user_tools"])
    assert {name: spec.mutates for name, spec in env.tools.tool_specs.items()} == expected["mutating"]


@pytest.mark.parametrize("domain", tb_support.DOMAINS)
def test_system_prompts_are_upstreams(domain: str, upstream: dict):
    env = tb_support.environment(domain)
    expected = upstream["domains"][domain]
    assert prompts.agent_system_prompt(env.policy) == expected["agent_system_prompt"]
    guidelines = {flag: (tb_support.ROOT / "user_simulator" / name).read_text()
                  for flag, name in ((False, "simulation_guidelines.md"), (True, "simulation_guidelines_tools.md"))}
    for task_id, task in tb_support.tasks(domain).items():
        with_tools = bool(env.get_user_tools(task.get("user_tools")))
        prompt = prompts.user_system_prompt(guidelines[with_tools], task_fields.scenario_text(task))
        assert with_tools == expected["tasks"][task_id]["user_has_tools"], task_id
        assert hashlib.sha256(prompt.encode()).hexdigest() == expected["tasks"][task_id]["user_system_prompt"], task_id


@pytest.mark.parametrize("domain", tb_support.DOMAINS)
def test_databases_hash_as_upstreams(domain: str, upstream: dict):
    env = tb_support.environment(domain)
    expected = upstream["domains"][domain]
    assert env.get_db_hash() == expected["initial_db_hash"]
    assert env.get_user_db_hash() == expected["initial_user_db_hash"]
    # after a task's initial state and its gold actions: see test_tb_gold_replays
    task = tb_support.tasks(domain)[next(iter(expected["tasks"]))]
    gold, _ = gold_environment(task, tb_support.domain_data(domain))
    assert gold.get_db_hash() == expected["tasks"][task["id"]]["gold_db_hash"]


@pytest.mark.slow
@pytest.mark.parametrize("domain", tb_support.DOMAINS)
def test_every_call_answers_as_upstream(domain: str, upstream: dict):
    """The result text (and error flag) of every call of the fuzz sequences, and the state after them."""
    expected = upstream["domains"][domain]["tasks"]
    raw = list(tb_support.tasks(domain).values())
    mismatches = []
    n = 0
    for task_id, calls in tb_fuzz.sequences(domain, raw):
        env = tb_support.environment(domain, tb_support.tasks(domain)[task_id])
        for call, want in zip(calls, expected[task_id]["fuzz"], strict=True):
            n += 1
            got = tb_fuzz.record(env.get_response(call))
            if got[:2] != want[:2]:
                mismatches.append((task_id, call["name"], call["arguments"], want[2], got[2]))
        assert (env.get_db_hash(), env.get_user_db_hash()) == (
            expected[task_id]["fuzz_db_hash"], expected[task_id]["fuzz_user_db_hash"]), task_id
    assert n > 100
    assert not mismatches, mismatches[:5]
