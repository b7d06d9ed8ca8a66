"""Real agents under ``--faults``: Claude Code (Anthropic Messages) and Codex (Responses), installed and run in
the task's network-less container against the run's gateway, driven by a scripted model; the gateway answers
their first call with a 429 (``Retry-After: 1``) and their second with a 5xx. Each CLI's own retry logic rides
them out: the task completes and scores 1, both faults are on their calls in ``trajectories.jsonl``, unbilled,
and the provider saw every other call exactly once (nothing billed twice)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from agentcompass.models.fault_profiles import fault_for, profile_from
from agentcompass.runtime.seeds import trial_seed
from agentcompass.testing import LoopbackOpenAI, run_benchmark
from agentcompass_example_coding import tasks as coding_tasks

from tests.agents.scripts import tool_agent
from tests.agents.test_agents_docker import KEY_VARIABLE, MODEL, SECRET, bundle, job_for, no_secret_in
from tests.helpers.docker_engine import require_engine

pytestmark = [pytest.mark.docker, pytest.mark.agent_cli, pytest.mark.timeout(1800)]

PROFILE = "[agent]\nrate_limit = 0.15\nretry_after = 1\nserver_error = 0.15\n"


def seed_faulting_the_first_two_calls() -> int:
    """A run seed whose (roman, trial 1) draws a 429 for the agent's first call, a 5xx for its second and
    nothing for the next ten."""
    rates = profile_from("p", {"agent": {"rate_limit": 0.15, "retry_after": 1, "server_error": 0.15}}).rates("agent")
    for seed in range(200_000):
        task_seed = trial_seed(seed, "roman", 1)
        kinds = [fault_for(rates, task_seed, "roman", 1, "agent", i).kind for i in range(1, 13)]
        if kinds[:2] == ["rate_limit", "server_error"] and not any(kinds[2:]):
            return seed
    raise AssertionError("no such seed")


@pytest.fixture(autouse=True)
def engine() -> None:
    require_engine()


@pytest.mark.parametrize("name", ["claude-code", "codex"])
async def test_an_agent_rides_out_injected_faults_and_nothing_is_billed_twice(name: str, tmp_path: Path) -> None:
    bundle(name)
    profile = tmp_path / "first-calls.toml"
    profile.write_text(PROFILE)
    reference = coding_tasks.by_id("roman").reference_solution
    job = job_for(name, "solution.py", reference, "python3 -c 'import solution; print(solution.roman(4))'")
    os.environ[KEY_VARIABLE] = SECRET
    try:
        with LoopbackOpenAI(tool_agent(job), api_key=SECRET) as server:
            run = await run_benchmark("example_coding", name, MODEL, environment="docker", run_dir=tmp_path / "run",
                                      model_base_url=server.base_url, model_api_key_env=KEY_VARIABLE, max_retries=0,
                                      task_ids=["roman"], seed=seed_faulting_the_first_two_calls(),
                                      faults=str(profile))
            reached = len(server.requests)
    finally:
        os.environ.pop(KEY_VARIABLE, None)
    assert run.metric("score") == {"roman": 1.0}, [r.error for r in run.results]
    calls = [c for c in run.trajectories if c["role"] == "agent" and not str(c.get("endpoint", "")).endswith(
        "count_tokens")]
    faults = [c.get("fault") for c in calls]
    assert [f["kind"] for f in faults if f] == ["rate_limit", "server_error"], faults
    assert faults[0] == {"kind": "rate_limit", "index": 1, "status": 429, "retry_after": 1.0}
    for call in calls[:2]:
        assert call["prompt_tokens"] == call["completion_tokens"] == 0 and not call.get("cost_usd")
    assert reached == len(calls) - 2  # the faulted calls never reached the provider; every other call once
    no_secret_in(run.run_dir)
