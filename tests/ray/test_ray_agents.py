"""Claude Code and Codex (the agents plugin's installed-agent harnesses) on a worker node of a real Ray cluster
(``conftest.py``), each in its task's network-less docker container against a loopback provider in its own
protocol (``anthropic/...`` Messages for Claude Code, ``openai/...`` Responses for Codex), driven by a scripted
model through the agent's own tools. The same run on one machine and on the cluster: the provider receives the
same requests (thinking blocks, ``cache_control``, reasoning items kept), the agent's stream starts before the
provider's ends, and the two runs' ``trajectories.jsonl`` agree (timings and ids aside)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime.codecs import CODECS, ProtocolError
from agentcompass.runtime.model_stream import ReasoningDelta, StreamEnd, events_of
from agentcompass.runtime.models import ModelError
from agentcompass.testing.scripted_models import ScriptedModel
from agentcompass.testing.upstream import LoopbackUpstream
from agentcompass_example_coding import tasks as coding_tasks
from aiohttp import web

from tests.agents.scripts import tool_agent
from tests.agents.test_agents_docker import bundle, job_for
from tests.helpers.docker_engine import require_engine
from tests.helpers.ray_cluster import LocalCluster
from tests.helpers.ray_runs import WORKER_IP, log_events, on_cluster, records, run_cli
from tests.helpers.threaded_upstream import upstream_in_thread
from tests.ray.test_remote_seam import comparable_calls

pytestmark = [pytest.mark.ray, pytest.mark.docker, pytest.mark.agent_cli, pytest.mark.timeout(1800)]

KEY_VARIABLE = "AGENTCOMPASS_RAY_AGENTS_KEY"
#: How long the provider holds the last event of each stream (the agent must have its first piece by then).
HOLD = 3.0
#: Per agent: the model (in the agent's own protocol) and whether the provider's root or its ``/v1`` is the base.
AGENTS = {"claude-code": ("anthropic/claude-sonnet-4-5", "root"), "codex": ("openai/gpt-5", "base_url")}


class HoldingUpstream(LoopbackUpstream):
    """A :class:`LoopbackUpstream` whose streams hold their last event for :data:`HOLD` seconds, noting for each
    stream that carried reasoning when its first event was written and when the stream ended (``reasoned``:
    pairs of ``time.time()``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reasoned: list[tuple[float, float]] = []

    async def _answer(self, request: web.Request, protocol: str, body: Any) -> web.StreamResponse:
        codec = CODECS[protocol]
        if not self._authorised(request):
            return web.json_response(codec.error_body(401, "invalid api key"), status=401)
        try:
            canonical = codec.parse_request(body)
            response = await self.model.chat(canonical.messages, tools=canonical.tools or None, **canonical.params)
        except (ProtocolError, ModelError) as exc:
            status = getattr(exc, "status", None) or 500
            return web.json_response(codec.error_body(status, str(exc)), status=status)
        if not canonical.stream:
            return web.json_response(codec.render_response(response, canonical.model))
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        encoder = codec.encoder(canonical.model, canonical)
        await stream.write(encoder.start())
        first = 0.0
        blocks = response.message.get("reasoning_blocks") or [{}]
        for event in events_of(response):
            if isinstance(event, ReasoningDelta):  # the whole block, signed (Anthropic) as the script gave it
                event = ReasoningDelta(event.text, signature=str(blocks[0].get("signature") or ""))
            for piece in self._pieces(event):
                if isinstance(piece, StreamEnd):
                    await asyncio.sleep(HOLD)
                await stream.write(encoder.event(piece))
                first = first or time.time()
        await stream.write_eof()
        if response.message.get("reasoning_blocks"):
            self.reasoned.append((first, time.time()))
        return stream


def comparable_body(body: Any) -> Any:
    """``body`` with what legitimately differs between two runs of the same script (:data:`VOLATILE`: session,
    turn and item ids, the agent's own timestamps) replaced by placeholders; everything else (thinking blocks
    and their signatures, cache_control, reasoning items) is compared as sent."""
    if isinstance(body, dict):
        return {k: comparable_body(v) for k, v in body.items()}
    if isinstance(body, list):
        return [comparable_body(v) for v in body]
    if isinstance(body, str):
        for pattern, stands_for in VOLATILE:
            body = pattern.sub(stands_for, body)
    return body


#: What varies run to run in what an agent sends: Claude Code's device and session ids (``metadata.user_id``),
#: Codex's session, turn and installation ids (``prompt_cache_key``, ``client_metadata``), its input items' ids,
#: its turn's start time, and its exec tool's chunk ids and wall times.
VOLATILE = [(re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
            (re.compile(r"\b[0-9a-f]{64}\b"), "<device>"),
            (re.compile(r"^(fc|fco|msg|rs)_[0-9a-zA-Z_<>-]+$"), r"\1_<id>"),
            (re.compile(r"Chunk ID: [0-9a-f]+"), "Chunk ID: <id>"),
            (re.compile(r"Wall time: [0-9.]+ seconds"), "Wall time: <s> seconds"),
            (re.compile(r'"turn_started_at_unix_ms":\d+'), '"turn_started_at_unix_ms":0')]


def with_reasoning(responder: Any, name: str) -> Any:
    """``responder``, its tool calls preceded by a reasoning block in the agent's protocol (a signed thinking
    block for Claude Code, a reasoning item for Codex), which the agent must send back as it got it."""
    block = ({"type": "thinking", "thinking": "Write it, then check.", "signature": "sig-thought-1=="}
             if name == "claude-code" else
             {"type": "reasoning", "id": "rs_ray_agents", "summary": [{"type": "summary_text", "text": "Plan."}]})

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        answer = responder(request)
        if answer.get("tool_calls"):
            return {**answer, "reasoning_blocks": [block], "reasoning_content": "Write it, then check."}
        return answer

    return respond


def run_agent(cluster: LocalCluster | None, name: str, out: Path, up: HoldingUpstream) -> None:
    model, base = AGENTS[name]
    proc = run_cli(cluster, "run", "example_coding", name, model, "--env", "docker", "-t", "roman",
                   "--model-base-url", getattr(up, base), "--model-api-key-env", KEY_VARIABLE, "--max-retries", "0",
                   *(on_cluster(cluster) if cluster else []), "-o", str(out),
                   env={KEY_VARIABLE: up.api_key}, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result,) = records(out / "results.jsonl")
    assert (result["status"], result["metrics"].get("score")) == ("COMPLETED", 1.0), result


@pytest.mark.parametrize("name", list(AGENTS))
def test_an_agent_on_a_worker_node_makes_the_calls_it_makes_on_one_machine(
        name: str, cluster: LocalCluster, tmp_path: Path) -> None:
    require_engine()
    bundle(name)
    reference = coding_tasks.by_id("roman").reference_solution
    sent: dict[str, list[Any]] = {}
    for where in ("local", "ray"):
        job = job_for(name, "solution.py", reference, "python3 -c 'import solution; print(solution.roman(4))'")
        with upstream_in_thread(ScriptedModel(with_reasoning(tool_agent(job), name)), kind=HoldingUpstream, api_key="sk-loopback-upstream",
                                piece=6) as up:
            assert isinstance(up, HoldingUpstream)
            run_agent(cluster if where == "ray" else None, name, tmp_path / where, up)
            sent[where] = [(r.path, comparable_body(r.body)) for r in up.requests]
            reasoned = list(up.reasoned)
        assert "IV" in job.outputs[1], job.outputs
        # (2) Each answer's first piece (its reasoning) reached the agent while the provider still held the
        # stream's end: the agent noted the reasoning in its transcript well before the stream ended (a relay that
        # held the stream back would give it the reasoning only with the end).
        noted = reasoning_noted(name, tmp_path / where)
        assert len(noted) == len(reasoned) == 2, (noted, reasoned)
        for at, (first, ended) in zip(noted, reasoned, strict=True):
            assert first - 0.05 <= at < ended - 0.5, (where, at, first, ended)
    (finished,) = log_events(tmp_path / "ray", "ray.finished")
    assert list(finished["attempts_by_node"]) == [WORKER_IP], finished  # the docker node ran it
    # (1) The provider got what the agent sent, as from one machine, in the agent's own protocol.
    assert sent["ray"] == sent["local"]
    later = json.dumps([body for _, body in sent["ray"][1:]])
    if name == "claude-code":  # the signed thinking block and the cache marks, as Claude Code sent them
        assert '{"type": "thinking", "thinking": "Write it, then check.", "signature": "sig-thought-1=="}' in later
        assert '"cache_control"' in later
    else:  # the reasoning item of each earlier turn
        assert '"summary": [{"type": "summary_text", "text": "Write it, then check."}]' in later, later
    calls = records(tmp_path / "ray" / "trajectories.jsonl")
    protocol = "anthropic" if name == "claude-code" else "responses"
    assert {(c["protocol"], c["passthrough"], c["via"]) for c in calls} == {(protocol, True, "gateway")}
    # (3) The same trajectories, timings and ids aside.
    assert trajectory(tmp_path / "ray") == trajectory(tmp_path / "local")


def trajectory(run_dir: Path) -> Any:
    """The run's model calls, timings and ids aside (``request_key`` hashes a request, its ids included)."""
    return comparable_body([{k: v for k, v in call.items() if k != "request_key"}
                            for call in comparable_calls(run_dir)])


def reasoning_noted(name: str, run_dir: Path) -> list[float]:
    """When the agent noted each reasoning block it received (``time.time()``), from its own transcript:
    Claude Code's session file writes each content block as it completes, Codex's rollout each output item."""
    home = run_dir / "artifacts" / "roman" / "attempt-1" / "agent" / "files" / "home"
    pattern = ".claude/projects/*/*.jsonl" if name == "claude-code" else ".codex/sessions/*/*/*/rollout-*.jsonl"
    (transcript,) = home.glob(pattern)
    noted = []
    for entry in records(transcript):
        if name == "claude-code":
            content = (entry.get("message") or {}).get("content")
            first = content[0].get("type") if entry.get("type") == "assistant" and isinstance(content, list) else None
        else:
            first = (entry.get("payload") or {}).get("type") if entry.get("type") == "response_item" else None
        if first in ("thinking", "reasoning"):
            noted.append(datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp())
    return noted
