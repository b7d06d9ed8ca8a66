"""An installed agent's run recorded and replayed offline: Claude Code (the agents plugin's ``claude-code``
harness) solves example_coding in a network-less docker container, its Anthropic Messages requests passed
through the gateway to an Anthropic provider (a loopback one, driven by a scripted model through Claude Code's
own tools); then the same run replayed with that provider gone — the same score from the same calls, every
one answered from the recording as a synthesized Anthropic stream."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime import TaskStatus
from agentcompass.testing import run_benchmark
from agentcompass.testing.scripted_models import ScriptedModel
from agentcompass.testing.upstream import LoopbackUpstream
from agentcompass_example_coding import tasks as coding_tasks

from tests.agents.scripts import tool_agent
from tests.agents.test_agents_docker import bundle, job_for
from tests.helpers.docker_engine import require_engine
from tests.helpers.replay_runs import calls, dead_base_url

pytestmark = [pytest.mark.docker, pytest.mark.agent_cli, pytest.mark.timeout(1500)]

AGENT = "claude-code"
MODEL = "anthropic/claude-sonnet-4-5"
KEY_VARIABLE = "AGENTCOMPASS_REPLAY_TEST_KEY"


async def run(run_dir: Path, base_url: str, **fields: Any) -> Any:
    return await run_benchmark("example_coding", AGENT, MODEL, environment="docker", run_dir=run_dir,
                               task_ids=["roman"], model_base_url=base_url, model_api_key_env=KEY_VARIABLE,
                               max_retries=0, **fields)


async def test_claude_code_replays_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_engine()
    bundle(AGENT)
    monkeypatch.setenv(KEY_VARIABLE, "sk-loopback")
    reference = coding_tasks.by_id("roman").reference_solution
    job = job_for(AGENT, "solution.py", reference, "python3 -c 'import solution; print(solution.roman(4))'")
    async with LoopbackUpstream(ScriptedModel(tool_agent(job)), api_key="sk-loopback") as up:
        live = await run(tmp_path / "live", up.root)
        asked = len(up.requests)
    assert live.metric("score") == {"roman": 1.0}, [r.error for r in live.results]
    recorded = live.trajectories
    assert asked == len(recorded) >= 3
    assert {(c["protocol"], c["passthrough"]) for c in recorded} == {("anthropic", True)}
    assert any(c["stream"] for c in recorded)

    replayed = await run(tmp_path / "replayed", dead_base_url().removesuffix("/v1"), replay=str(tmp_path / "live"))
    result = replayed.result("roman")
    assert result.status is TaskStatus.COMPLETED, result.error
    assert replayed.metric("score") == {"roman": 1.0}
    assert [c["source"] for c in replayed.trajectories] == ["replay"] * len(recorded)
    assert calls(tmp_path / "replayed") == calls(tmp_path / "live")
    assert os.environ[KEY_VARIABLE] == "sk-loopback"
