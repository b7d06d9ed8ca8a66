"""Calls cut before their end (a timeout, an interrupt, a client gone) are recorded and billed: in the
trajectory and in the attempt's usage, with the tokens counted so far and the reason they were cut."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from agentcompass.runtime import BaseBenchmark, RunRequest, RunResult, TaskSpec, TaskStatus
from agentcompass.testing import ScriptedModel, run_benchmark, scripted, text
from agentcompass.testing.upstream import LoopbackUpstream


class OneTask(BaseBenchmark):
    """One task, ``t000``, scored 1.0 when its run completed."""

    name = "one_task"

    def load_tasks(self, req: RunRequest):  # type: ignore[no-untyped-def]
        yield TaskSpec(task_id="t000", data={"instruction": "talk"})

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        return RunResult(task_id=task.task_id, metrics={"score": 1.0})

#: About 2,000 characters, streamed 8 at a time 20 ms apart: some 5 s, far past the run phase's second.
LONG_ANSWER = " ".join(f"word{i:04d}" for i in range(220))
RUN_TIMEOUT = 1.0


async def _stream_through_gateway(plan: Any) -> None:
    endpoint = plan.model_endpoints["agent"]
    async with aiohttp.ClientSession() as session, session.post(
        f"{endpoint.base_url}/chat/completions", headers={"Authorization": f"Bearer {endpoint.api_key}"},
        json={"model": endpoint.model, "stream": True, "messages": [{"role": "user", "content": "talk"}]},
    ) as reply:
        async for _ in reply.content:
            pass


async def _stream_in_process(plan: Any) -> None:
    async for _ in plan.models["agent"].stream([{"role": "user", "content": "talk"}]):
        pass


@pytest.mark.parametrize("via", ["gateway", "client"])
async def test_a_stream_cut_by_the_run_timeout_is_recorded_with_its_tokens_so_far(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, via: str) -> None:
    streaming = _stream_through_gateway if via == "gateway" else _stream_in_process

    async def agent(task, prepared, req, plan, env):  # type: ignore[no-untyped-def]
        await streaming(plan)
        return RunResult(task_id=task.task_id)

    async with LoopbackUpstream(ScriptedModel(scripted(text(LONG_ANSWER))), piece=8, delay=0.02) as up:
        monkeypatch.setenv("CUT_TEST_KEY", up.api_key)
        run = await run_benchmark(
            OneTask, agent, "openai-compatible/slow", run_dir=tmp_path / "run",
            model_base_url=up.base_url, model_api_key_env="CUT_TEST_KEY",
            phase_timeouts={"run": RUN_TIMEOUT}, prices=str(_prices(tmp_path)))
        await asyncio.sleep(0.2)  # the upstream notices its client went away
    result = run.result("t000")
    assert result.status is TaskStatus.RUN_ERROR and "timed out" in (result.error or ""), result
    calls = run.jsonl("trajectories.jsonl")
    assert len(calls) == 1, calls
    call = calls[0]
    assert call["cut"], call
    assert call["error"] == call["cut"]
    streamed = call["completion_tokens"] * 4
    assert 8 <= streamed < len(LONG_ANSWER) * 0.8, call  # some of the answer came, not all of it
    assert call["prompt_tokens"] > 0
    assert call["cost_usd"] == pytest.approx((call["prompt_tokens"] + 2 * call["completion_tokens"]) / 1e6)
    usage = result.usage["models"]["agent"]
    assert usage["calls"] == 1
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (call["prompt_tokens"],
                                                                    call["completion_tokens"])
    assert usage["cost_usd"] == pytest.approx(call["cost_usd"])
    assert up.cancelled == 1  # the provider's stream was really cut mid-way


async def test_a_call_cut_by_the_run_timeout_before_any_answer_is_billed_its_request(tmp_path: Path) -> None:
    async def agent(task, prepared, req, plan, env):  # type: ignore[no-untyped-def]
        await plan.models["agent"].chat([{"role": "user", "content": "a question " * 40}])
        return RunResult(task_id=task.task_id)

    run = await run_benchmark(OneTask, agent, "mock", run_dir=tmp_path / "run",
                              model_args={"latency": "5"},
                              phase_timeouts={"run": 0.5})
    result = run.result("t000")
    assert result.status is TaskStatus.RUN_ERROR, result
    (call,) = run.jsonl("trajectories.jsonl")
    assert call["cut"] == call["error"] == "cancelled (CancelledError)"
    assert call["prompt_tokens"] > 100 and call["completion_tokens"] == 0, call
    assert result.usage["models"]["agent"]["prompt_tokens"] == call["prompt_tokens"]


def _prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"openai-compatible/slow": {"input": 1.0, "output": 2.0}}))
    return path
