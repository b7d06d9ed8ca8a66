"""Replay in every protocol the gateway speaks, with the vendors' own SDKs as the agent: Anthropic Messages
passed through to an Anthropic provider (streamed and whole, ``count_tokens`` too), OpenAI Responses, chat
completions and Gemini translated for it (streamed and whole). Recorded against a loopback provider, replayed with the
provider gone: the agent gets the same answers, the trajectory the same calls, marked ``replay``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.testing import run_benchmark
from agentcompass.testing.scripted_models import ScriptedModel, scripted, text, tool_call
from agentcompass.testing.upstream import LoopbackUpstream
from agentcompass_models.anthropic import make_anthropic
from google import genai
from google.genai import types

from tests.harnesses.support import Tiny
from tests.helpers.replay_runs import calls, dead_base_url

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


async def sdk_agent(task: Any, prepared: Any, req: Any, plan: Any, env: Any) -> RunResult:
    """An agent speaking three protocols through the SDKs, keeping every answer it got."""
    endpoint = plan.model_endpoints["agent"]
    claude = anthropic.AsyncAnthropic(base_url=endpoint.base_url.removesuffix("/v1"), api_key=endpoint.api_key,
                                      max_retries=0)
    gpt = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    got: list[Any] = []
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Weather in Rome? ({task.task_id})"}]
    kwargs: dict[str, Any] = dict(model="claude-sonnet-4-5", max_tokens=512, system="Be brief.",
                                  tools=[{"name": "get_weather", "input_schema": WEATHER}])
    async with claude.messages.stream(messages=history, **kwargs) as stream:
        first = await stream.get_final_message()
    got.append([b.model_dump(exclude_none=True) for b in first.content])
    history += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[-1].id,
                                              "content": "28C"}]}]
    counted = await claude.messages.count_tokens(messages=history, model="claude-sonnet-4-5")
    got.append(counted.input_tokens > 0)
    second = await claude.messages.create(messages=history, **kwargs)
    got.append([b.model_dump(exclude_none=True) for b in second.content])
    streamed = await gpt.responses.create(model="agent", input="Say hi.", stream=True)
    pieces = [event.delta async for event in streamed if event.type == "response.output_text.delta"]
    got.append("".join(pieces))
    chat = await gpt.chat.completions.create(model="agent", messages=[{"role": "user", "content": "Bye?"}])
    got.append(chat.choices[0].message.content)
    gemini = genai.Client(api_key=endpoint.api_key, http_options=types.HttpOptions(
        base_url=endpoint.base_url.removesuffix("/v1"), api_version="v1beta"))
    chunks = [c async for c in await gemini.aio.models.generate_content_stream(model="gemini-2.5-pro",
                                                                               contents="Ciao?")]
    got.append("".join(c.text or "" for c in chunks))
    await claude.close()
    await gpt.close()
    return RunResult(task_id=task.task_id, final_answer=json.dumps(got))


def provider(root: str) -> Any:
    return make_anthropic("claude-up", settings=ProviderSettings(base_url=root, max_retries=0,
                                                                 environ={"ANTHROPIC_API_KEY": "sk-up"}))


async def test_an_agent_speaking_every_protocol_replays_offline(tmp_path: Path) -> None:
    answers = scripted(tool_call("get_weather", "toolu_7", city="Rome"), text("Warm in Rome."), text("Hi there."),
                       text("Goodbye."), text("Ciao!"))
    async with LoopbackUpstream(ScriptedModel(answers), api_key="sk-up", piece=4) as up:
        live = await run_benchmark(Tiny, sdk_agent, provider(up.root), run_dir=tmp_path / "live")
    assert live.result("t1").status is TaskStatus.COMPLETED, live.result("t1").error
    got = json.loads(live.result("t1").final_answer or "null")
    assert got[0][-1]["input"] == {"city": "Rome"} and got[2][0]["text"] == "Warm in Rome."
    assert got[3:] == ["Hi there.", "Goodbye.", "Ciao!"]
    recorded = [(c["protocol"], c["passthrough"], c["stream"]) for c in live.trajectories]
    assert recorded == [("anthropic", True, True), ("anthropic", True, False), ("responses", False, True),
                        ("chat", False, False), ("gemini", False, True)]

    replayed = await run_benchmark(Tiny, sdk_agent, provider(dead_base_url().removesuffix("/v1")),
                                   run_dir=tmp_path / "replayed", replay=str(tmp_path / "live"))
    result = replayed.result("t1")
    assert result.status is TaskStatus.COMPLETED, result.error
    assert json.loads(result.final_answer or "null") == got
    assert [(c["protocol"], c["passthrough"], c["stream"]) for c in replayed.trajectories] == recorded
    assert [c["source"] for c in replayed.trajectories] == ["replay"] * 5
    assert calls(tmp_path / "replayed") == calls(tmp_path / "live")


@pytest.mark.parametrize("stream", [True, False])
async def test_a_passthrough_miss_answers_the_agent_with_an_error_and_fails_the_task(tmp_path: Path,
                                                                                     stream: bool) -> None:
    questions = ["first", "second"]  # the live run asks the first, the replay the second

    async with LoopbackUpstream(ScriptedModel(scripted(text("one"))), api_key="sk-up") as up:
        async def ask(task: Any, prepared: Any, req: Any, plan: Any, env: Any) -> RunResult:
            endpoint = plan.model_endpoints["agent"]
            claude = anthropic.AsyncAnthropic(base_url=endpoint.base_url.removesuffix("/v1"),
                                              api_key=endpoint.api_key, max_retries=0)
            question = questions.pop(0)
            try:
                if stream:
                    async with claude.messages.stream(model="x", max_tokens=64, messages=[
                            {"role": "user", "content": question}]) as s:
                        answer = (await s.get_final_message()).content[0].text  # type: ignore[union-attr]
                else:
                    message = await claude.messages.create(model="x", max_tokens=64, messages=[
                        {"role": "user", "content": question}])
                    answer = message.content[0].text  # type: ignore[union-attr]
            except anthropic.APIStatusError as exc:
                answer = f"HTTP {exc.status_code}"
            await claude.close()
            return RunResult(task_id=task.task_id, final_answer=answer)

        live = await run_benchmark(Tiny, ask, provider(up.root), run_dir=tmp_path / "live")
        assert live.result("t1").final_answer == "one"
    replayed = await run_benchmark(Tiny, ask, provider(dead_base_url().removesuffix("/v1")),
                                   run_dir=tmp_path / "replayed", replay=str(tmp_path / "live"))
    result = replayed.result("t1")
    assert result.status is TaskStatus.RUN_ERROR
    assert (result.error or "").startswith("replay miss: task 't1' (trial 1), agent call 1:"), result.error
    assert "messages[0].content differs" in (result.error or "") and "'first'" in (result.error or "")
    assert "'second'" in (result.error or "")
    assert result.final_answer is None or "HTTP 400" in result.final_answer  # the agent got a 400, not a retry
    assert replayed.exit_code == 1


async def test_the_cache_answers_passthrough_and_translated_calls_streamed_or_not(tmp_path: Path) -> None:
    answers = scripted(tool_call("get_weather", "toolu_7", city="Rome"), text("Warm in Rome."), text("Hi there."),
                       text("Goodbye."), text("Ciao!"))
    cache = str(tmp_path / "cache")
    async with LoopbackUpstream(ScriptedModel(answers), api_key="sk-up", piece=4) as up:
        live = await run_benchmark(Tiny, sdk_agent, provider(up.root), run_dir=tmp_path / "live", cache=cache)
        assert len(up.requests) == 6  # the token count is the provider's too (not cached; estimated without it)
    assert live.result("t1").status is TaskStatus.COMPLETED, live.result("t1").error
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 5
    cached = await run_benchmark(Tiny, sdk_agent, provider(dead_base_url().removesuffix("/v1")),
                                 run_dir=tmp_path / "cached", cache=cache)
    result = cached.result("t1")
    assert result.status is TaskStatus.COMPLETED, result.error
    assert json.loads(result.final_answer or "null") == json.loads(live.result("t1").final_answer or "null")
    assert [c["source"] for c in cached.trajectories] == ["cache"] * 5
    assert calls(tmp_path / "cached") == calls(tmp_path / "live")


async def test_replay_latency_waits_each_calls_recorded_latency(tmp_path: Path) -> None:
    async def slow(request: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.4)
        return text(f"answer {len(request['messages'])}")

    async def two_calls(task: Any, prepared: Any, req: Any, plan: Any, env: Any) -> RunResult:
        model = plan.models["agent"]
        first = await model.chat([{"role": "user", "content": "one"}])
        second = await model.chat([{"role": "user", "content": "one"}, dict(first.message),
                                   {"role": "user", "content": "two"}])
        return RunResult(task_id=task.task_id, final_answer=second.content)

    live = await run_benchmark(Tiny, two_calls, ScriptedModel(slow), run_dir=tmp_path / "live")
    assert live.result("t1").final_answer == "answer 3"
    at_once = await run_benchmark(Tiny, two_calls, ScriptedModel(), run_dir=tmp_path / "at-once",
                                  replay=str(tmp_path / "live"))
    timed = await run_benchmark(Tiny, two_calls, ScriptedModel(), run_dir=tmp_path / "timed",
                                replay=str(tmp_path / "live"), replay_latency=True)
    for run in (at_once, timed):
        assert run.result("t1").final_answer == "answer 3"
        assert [c["source"] for c in run.trajectories] == ["replay", "replay"]
    assert all(c["latency_s"] >= 0.4 for c in live.trajectories)
    assert all(c["latency_s"] < 0.2 for c in at_once.trajectories)
    assert all(c["latency_s"] >= 0.4 for c in timed.trajectories)
