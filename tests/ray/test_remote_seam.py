"""The remote half of the executor seam (``agentcompass.runtime.remote``) without Ray: an executor that sends
every attempt through pickle to an :class:`AttemptWorker` in this process, as a remote executor sends it to
another machine. The real runner, real plugins, a real gateway over HTTP; only the transport is in process."""

from __future__ import annotations

import asyncio
import json
import pickle
import time
from pathlib import Path
from typing import Any

import pytest
from agentcompass import hookimpl
from agentcompass.plugins import load_plugins
from agentcompass.runner import Runner
from agentcompass.runtime import RunRequest
from agentcompass.runtime.executor import AttemptSource, ExecutionContext, Executor
from agentcompass.runtime.remote import AttemptWorker, scrub_request
from agentcompass.testing.scripted_models import LoopbackOpenAI
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples
from tests.helpers.ray_runs import comparable, records


class PickledRemote(Executor):
    """Sends each attempt as bytes to a worker built from the installed plugins, and its outcome back."""

    name = "pickled"
    remote = True
    sent: list[bytes] = []
    #: Pass each phase change to the head as it happens (``grant.phase``), as the Ray executor does.
    live = False
    #: Attempts (task, trial, attempt) whose worker has returned.
    returned: set[tuple[str, int, int]] = set()
    #: Attempts on the worker side now, and the most at once.
    running = [0, 0]

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.worker: AttemptWorker | None = None

    async def check(self, request, environments, secrets=()):  # type: ignore[no-untyped-def]
        self.worker = AttemptWorker(pickle.loads(pickle.dumps(request)))
        await self.worker.setup(environments)

    async def execute(self, attempts: AttemptSource, context: ExecutionContext) -> None:
        url = f"http://{context.gateway_host}:{context.gateway_port}/v1"
        assert self.worker is not None

        async def loop() -> None:
            while (spec := await attempts.next()) is not None:
                grant = context.grant_remote(spec, url)
                wire = pickle.dumps(grant.attempt)
                PickledRemote.sent.append(wire)
                told = grant.phase if self.live else None
                logged = grant.log if self.live else None
                PickledRemote.running[0] += 1
                PickledRemote.running[1] = max(PickledRemote.running)
                try:
                    returned = await self.worker.run(pickle.loads(wire), told, logged)  # type: ignore[union-attr]
                finally:
                    PickledRemote.running[0] -= 1
                PickledRemote.returned.add(spec.key)
                attempts.report(grant.finish(pickle.loads(pickle.dumps(returned))))

        await asyncio.gather(*(loop() for _ in range(context.request.schedule.concurrency)))

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.close()


class Plugin:
    @hookimpl
    def register_executors(self, register):  # type: ignore[no-untyped-def]
        register("pickled", PickledRemote)


def run(request: RunRequest, run_dir: Path, *observers: object) -> Any:
    host = load_plugins()
    host.add_plugin(Plugin(), "pickled")
    for i, observer in enumerate(observers):
        host.add_plugin(observer, f"observer-{i}")
    return asyncio.run(Runner(host, request, run_dir=run_dir, handle_signals=False).run())


@pytest.mark.parametrize(("benchmark", "harness", "extra"), [
    ("example_interactive", "none", {}),
    ("example_coding", "oracle", {}),
    # A budget the head enforces: its meter refuses the calls the worker relays (LIMIT_REACHED, as locally).
    ("example_interactive", "none", {"max_tokens_per_task": 250}),
])
def test_a_remote_attempt_ends_as_a_local_one(tmp_path: Path, benchmark: str, harness: str,
                                               extra: dict[str, Any]) -> None:
    base = RunRequest(benchmark=benchmark, harness=harness, model="mock").with_options(seed=9, trials=2, concurrency=3, limit=5, **extra)
    local = run(base, tmp_path / "local")
    remote = run(base.with_options(executor="pickled"), tmp_path / "remote")
    assert comparable(tmp_path / "remote") == comparable(tmp_path / "local")
    assert remote.summary.status_counts == local.summary.status_counts
    if extra:
        assert "LIMIT_REACHED" in remote.summary.status_counts
    calls = records(tmp_path / "remote" / "trajectories.jsonl")
    assert len(calls) == len(records(tmp_path / "local" / "trajectories.jsonl"))


def test_nothing_sent_holds_the_provider_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-seam-" + "k3y" * 8
    monkeypatch.setenv("SEAM_TEST_KEY", key)
    PickledRemote.sent.clear()
    with LoopbackOpenAI(api_key=key) as server:
        outcome = run(RunRequest(benchmark="example_interactive", harness="none", model="openai-compatible/mock", model_args={"temperature": "0"}).with_options(model_base_url=server.base_url, model_api_key_env="SEAM_TEST_KEY", executor="pickled", concurrency=2),
                      tmp_path / "run")
    assert outcome.summary.status_counts == {"COMPLETED": 11}
    assert len(PickledRemote.sent) == 11
    assert not [w for w in PickledRemote.sent if key.encode() in w]
    sent = pickle.loads(PickledRemote.sent[0])
    assert sent.spec.request.models.base_url is None  # may carry credentials: the worker needs none
    assert all(e.api_key.startswith("acgw-") for e in sent.endpoints.values())  # a per-attempt gateway token
    assert json.loads((tmp_path / "run" / "run.json").read_text())["request"]["executor"] == "pickled"


@settings(max_examples=examples(50), deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "token", "x"]), st.text(min_size=0, max_size=20), max_size=3),
       st.text(alphabet="abcdef0123456789", min_size=8, max_size=16))
def test_scrubbing_leaves_no_secret_in_any_option(options: dict[str, str], secret: str) -> None:
    tainted = {k: f"pre{secret}post" if i % 2 else v for i, (k, v) in enumerate(options.items())}
    req = RunRequest(benchmark="b", harness="h", model="m", model_args=tainted, benchmark_args=tainted, harness_args=tainted, environment_args=tainted).with_options(executor_args=tainted, model_base_url=f"https://user:{secret}@example.invalid/v1")
    scrubbed = scrub_request(req, [secret])
    assert secret not in repr(scrubbed)
    assert set(scrubbed.model_args) == set(tainted)  # keys stay; only values holding a secret go
    untouched = {k: v for k, v in tainted.items() if secret not in v}
    assert {k: v for k, v in scrubbed.model_args.items() if k in untouched} == untouched


async def test_the_multiplexed_gateway_checks_every_token_and_stops_with_sockets_open() -> None:
    import time

    from agentcompass.models.gateway import ModelGateway
    from agentcompass.models.gateway_client import GatewayClient, GatewayPool
    from agentcompass.models.metering import TaskMeter
    from agentcompass.runtime import ModelEndpoint, ModelError
    from agentcompass.testing.scripted_models import ScriptedModel, text

    gateway = ModelGateway({"agent": "scripted"})
    await gateway.start()
    pool = GatewayPool(timeout=30)
    started = time.monotonic()
    try:
        meter = TaskMeter("t", 1)
        token, endpoints = gateway.grant({"agent": ScriptedModel(lambda request: text("pong"))}, meter,
                                         gateway.base_url)
        good = GatewayClient(endpoints["agent"], pool)
        replies = await asyncio.gather(*(good.chat([{"role": "user", "content": str(i)}]) for i in range(20)))
        assert {r.content for r in replies} == {"pong"} and len(meter.calls) == 20
        assert {c.via for c in meter.calls} == {"client"}  # recorded as in-process calls, as locally
        forged = GatewayClient(ModelEndpoint(gateway.base_url, "acgw-forged", "scripted"), pool)
        with pytest.raises(ModelError, match="invalid or expired token") as caught:
            await forged.chat([{"role": "user", "content": "x"}])
        assert caught.value.status == 401 and caught.value.fatal
        gateway.revoke(token)
        with pytest.raises(ModelError, match="invalid or expired token"):
            await good.chat([{"role": "user", "content": "late"}])
    finally:
        started = time.monotonic()
        await gateway.stop()  # the worker's socket is still open: stop closes it instead of waiting
        assert time.monotonic() - started < 5
        await pool.aclose()


@pytest.mark.parametrize("budget", [None, 60])
def test_an_anthropic_client_in_a_remote_attempt_is_passed_through_streamed_and_budgeted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int | None) -> None:
    """Claude Code's kind of call from a remote attempt's environment, through the worker's relay, to an
    Anthropic-protocol provider: kept as sent, streamed as produced; a budget reached mid-stream ends the stream
    with Anthropic's error event and the attempt is LIMIT_REACHED."""
    import sys

    from agentcompass.testing.scripted_models import ScriptedModel, scripted, text

    from tests.helpers.threaded_upstream import CLAUDE_LIKE, upstream_in_thread

    script = tmp_path / "claude_like.py"
    script.write_text(CLAUDE_LIKE)
    answer = "abcde " * 150
    with upstream_in_thread(ScriptedModel(scripted(text(answer))), piece=6, delay=0.01) as up:
        monkeypatch.setenv("SEAM_ANTHROPIC_KEY", up.api_key)
        request = RunRequest(benchmark="example_coding", harness="command", model="anthropic/claude-up",
                             harness_args={"command": f"{sys.executable} {script} 4000"}).with_options(
            model_base_url=up.root, model_api_key_env="SEAM_ANTHROPIC_KEY", executor="pickled",
            task_ids=("roman",), **({"max_tokens_per_task": budget} if budget else {}))
        outcome = run(request, tmp_path / "run")
        requests = list(up.requests)
    stdout = tmp_path / "run" / "artifacts" / "roman" / "attempt-1" / "command" / "stdout.txt"
    printed = json.loads(stdout.read_text().strip().splitlines()[-1])
    (sent,) = requests
    assert sent.body["messages"][1]["content"][0]["signature"] == "sig-abc=="
    assert sent.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    (call,) = records(tmp_path / "run" / "trajectories.jsonl")
    assert (call["protocol"], call["passthrough"], call["via"]) == ("anthropic", True, "gateway")
    if budget is None:
        assert printed["text"] == answer and printed["spread"] > 0.4, printed
        assert outcome.summary.status_counts == {"COMPLETED": 1}
    else:
        assert "max_tokens_per_task=60" in printed["error"] and 0 < len(printed["text"]) < len(answer), printed
        assert outcome.summary.status_counts == {"LIMIT_REACHED": 1}


class PhaseLog:
    """Each phase event of the run, with whether its attempt's worker had returned when it came."""

    def __init__(self) -> None:
        self.seen: list[tuple[tuple[str, int, int], str, bool]] = []

    @hookimpl
    def agentcompass_task_event(self, event: Any) -> None:
        if event.event == "task.phase":
            key = (event.task_id, event.trial, event.attempt)
            self.seen.append((key, event.phase, key in PickledRemote.returned))


@pytest.mark.parametrize("live", [True, False])
def test_phase_changes_told_live_reach_observers_while_the_attempt_runs_and_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live: bool) -> None:
    monkeypatch.setattr(PickledRemote, "live", live)
    PickledRemote.returned.clear()
    phases = PhaseLog()
    request = RunRequest(benchmark="example_interactive", harness="none", model="mock").with_options(
        executor="pickled", concurrency=3, limit=4)
    outcome = run(request, tmp_path / "run", phases)
    assert outcome.summary.status_counts == {"COMPLETED": 4}
    keys = {key for key, _, _ in phases.seen}
    assert len(keys) == 4
    for key in keys:
        mine = [(phase, after) for k, phase, after in phases.seen if k == key]
        # Every phase once, in order: told live, not replayed when the outcome comes back.
        assert [phase for phase, _ in mine] == ["PREPARING", "RUNNING", "COLLECTING", "EVALUATING", "FINISHED"]
        # Live, each came while the worker still ran the attempt; without grant.phase, the outcome brings them.
        assert {after for _, after in mine} == {not live}


def test_a_suites_shared_concurrency_binds_a_remote_executor(tmp_path: Path) -> None:
    from agentcompass.suites.cell_state import SuiteDirectory
    from agentcompass.suites.scheduler import SuiteRunner
    from agentcompass.suites.suite_file import expand

    PickledRemote.running[:] = [0, 0]
    host = load_plugins()
    host.add_plugin(Plugin(), "pickled")
    grid = {"defaults": {"benchmark": "example_interactive", "harness": "none", "model": "mock",
                         "model_args": {"latency": "0.05"}, "executor": "pickled", "concurrency": 3, "limit": 4},
            "run": [{"name": f"c{i}", "seed": i} for i in range(4)]}
    runner = SuiteRunner(host, SuiteDirectory(tmp_path / "s"), concurrency=2, handle_signals=False)
    outcome = asyncio.run(runner.run(expand(grid, "s.toml")))
    assert [c.state for c in outcome.cells] == ["finished"] * 4
    # Four cells of three workers each: never more than the suite's two attempts on the worker side at once.
    assert PickledRemote.running == [0, 2]


def comparable_calls(run_dir: Path) -> list[dict[str, Any]]:
    """The run's model-call records without what differs run to run (timings, ids)."""
    timing = {"started_at", "latency_s", "ttft_s", "first_token_s", "ended_at", "attempt_id", "call_id", "id"}
    return [{k: v for k, v in call.items() if k not in timing and not k.endswith(("_at", "_s"))}
            for call in records(run_dir / "trajectories.jsonl")]


def test_a_remote_in_process_client_makes_the_local_calls_and_streams_piece_by_piece(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python benchmark's own ``chat`` and ``stream`` calls on a worker: the provider gets the same requests
    as from a local run (every setting kept), the calls are recorded as local in-process ones, and the stream's
    first piece reaches the worker while the provider is still streaming."""
    import agentcompass.remote_worker as remote_worker
    from agentcompass.testing.scripted_models import ScriptedModel, scripted, text

    from tests.helpers import stream_probe_plugin
    from tests.helpers.threaded_upstream import upstream_in_thread

    def with_probe() -> Any:
        host = load_plugins()
        host.add_plugin(stream_probe_plugin, "stream_probe")
        return host

    monkeypatch.setattr(remote_worker, "load_plugins", with_probe)
    answer = "abcde" * 20
    sent: dict[str, list[Any]] = {}
    for executor in ("local", "pickled"):
        with upstream_in_thread(ScriptedModel(scripted(text("whole"), text(answer))), piece=5, delay=0.05) as up:
            monkeypatch.setenv("SEAM_PROBE_KEY", up.api_key)
            request = RunRequest(benchmark="stream_probe", harness="none", model="openai-compatible/probe").with_options(
                model_base_url=up.base_url, model_api_key_env="SEAM_PROBE_KEY", executor=executor, seed=3)
            outcome = run(request, tmp_path / executor, stream_probe_plugin)
            streamed_until = time.time()
            sent[executor] = [(r.path, r.body) for r in up.requests]
        assert outcome.summary.status_counts == {"COMPLETED": 1}
        (result,) = records(tmp_path / executor / "results.jsonl")
        assert result["final_answer"] == f"whole|{answer}"
        pieces = json.loads((tmp_path / executor / "artifacts" / "probe" / "attempt-1" / "pieces.json").read_text())
        # Piece by piece (20 of them, 50 ms apart), not the whole answer at the end.
        assert "".join(p for _, p in pieces) == answer and len(pieces) >= 10, pieces
        assert pieces[-1][0] - pieces[0][0] > 0.5 and streamed_until - pieces[0][0] > 0.5
    assert sent["pickled"] == sent["local"]
    ((_, whole), (_, streamed)) = sent["pickled"]
    for body in (whole, streamed):
        assert {k: body.get(k) for k in stream_probe_plugin.SETTINGS} == stream_probe_plugin.SETTINGS
    assert comparable_calls(tmp_path / "pickled") == comparable_calls(tmp_path / "local")
    assert [c["via"] for c in comparable_calls(tmp_path / "pickled")] == ["client", "client"]


@pytest.mark.parametrize("live", [True, False])
def test_warnings_a_remote_attempt_logs_reach_the_runs_log_once_in_order_with_its_phases(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live: bool) -> None:
    """A warning logged by an attempt's code on the worker lands in the head's ``logs.jsonl`` as a local one
    does (between the attempt's phase events, in order), told live or brought by the outcome, never twice."""
    import agentcompass.remote_worker as remote_worker

    from tests.helpers import stream_probe_plugin

    def with_probe() -> Any:
        host = load_plugins()
        host.add_plugin(stream_probe_plugin, "stream_probe")
        return host

    monkeypatch.setattr(remote_worker, "load_plugins", with_probe)
    monkeypatch.setattr(PickledRemote, "live", live)
    request = RunRequest(benchmark="stream_probe", harness="none", model="mock",
                         benchmark_args={"warn": "line 3 of records.jsonl"})
    for executor in ("local", "pickled"):
        outcome = run(request.with_options(executor=executor), tmp_path / executor, stream_probe_plugin)
        assert outcome.summary.status_counts == {"COMPLETED": 1}
    def told(run_dir: Path) -> list[Any]:
        return [(e["event"], e.get("phase") or e.get("line"), e.get("level"), e.get("detail"), e.get("path"))
                for e in records(run_dir / "logs.jsonl") if e["event"] in ("task.phase", "probe.damaged_record")]

    assert told(tmp_path / "pickled") == told(tmp_path / "local")
    assert [t for t in told(tmp_path / "pickled") if t[0] == "probe.damaged_record"] == [
        ("probe.damaged_record", n, "warning", "line 3 of records.jsonl", "records.jsonl") for n in (1, 2)]
    (first,) = [e for e in records(tmp_path / "pickled" / "logs.jsonl") if e.get("line") == 1]
    assert (first["task_id"], first["trial"], first["attempt"], first["plugin"]) == ("probe", 1, 1, "stream_probe")
