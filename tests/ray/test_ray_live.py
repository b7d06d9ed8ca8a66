"""``--executor ray`` while a run is under way, against a real two-node Ray cluster on loopback (see
``conftest.py``): a remote attempt's phase changes and model calls reach the head's observers as they happen,
and nodes that join during a run are given attempts."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agentcompass.testing.scripted_models import LoopbackOpenAI, mock_responder

from tests.helpers.event_recorder import VARIABLE
from tests.helpers.ray_cluster import LocalCluster
from tests.helpers.ray_runs import HEAD_IP, comparable, log_events, on_cluster, records, run_cli, start_cli

pytestmark = pytest.mark.ray


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def gated_responder(gate: threading.Event) -> Any:
    """Answers as the mock model does, but only once ``gate`` is set."""
    async def respond(request: dict[str, Any]) -> Any:
        await asyncio.to_thread(gate.wait, 300)
        return await mock_responder(request)

    return respond


def test_a_remote_attempts_phase_changes_and_model_calls_reach_the_head_as_they_happen(
        cluster: LocalCluster, tmp_path: Path) -> None:
    out, events = tmp_path / "ray", tmp_path / "events.jsonl"
    gate = threading.Event()

    def phases() -> list[dict[str, Any]]:
        return [e for e in records(events) if e["kind"] == "task" and e["event"] == "task.phase"]

    with LoopbackOpenAI(gated_responder(gate), api_key=None) as server:
        proc = start_cli(cluster, "run", "example_interactive", "none", "openai-compatible/mock",
                         "--model-base-url", server.base_url, "-n", "2", "-c", "2", *on_cluster(cluster),
                         "-o", str(out), env={VARIABLE: str(events)}, testing=True)
        try:
            wait_until(lambda: len(server.requests) >= 2, 120, "both attempts to call their model")
            # Each attempt waits on its model, on its node: the head has heard that it runs.
            wait_until(lambda: len([e for e in phases() if e["phase"] == "RUNNING"]) == 2, 30,
                       "the RUNNING events of the remote attempts")
            assert records(out / "results.jsonl") == []
            gate.set()
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, stdout + stderr
    seen = records(events)
    for task_id in {e["task_id"] for e in seen}:
        mine = [e for e in seen if e["task_id"] == task_id]
        kinds = ["model_call" if e["kind"] == "model_call" else e["phase"] if e["event"] == "task.phase"
                 else e["event"] for e in mine]
        # Each phase once (heard live, not replayed at the end), in order; the calls while it ran; then the end.
        assert [k for k in kinds if k != "model_call"] == [
            "PREPARING", "RUNNING", "COLLECTING", "EVALUATING", "FINISHED", "task.finished"], kinds
        running, collecting = kinds.index("RUNNING"), kinds.index("COLLECTING")
        assert "model_call" in kinds and {i for i, k in enumerate(kinds) if k == "model_call"} <= set(
            range(running + 1, collecting))


def test_a_warning_logged_on_a_node_reaches_the_heads_log_while_the_attempt_runs_in_order(
        cluster: LocalCluster, tmp_path: Path) -> None:
    """``stream_probe -b warn=...`` logs a warning on its node before its model calls and one after: both land
    in the head's ``logs.jsonl`` once, between the attempt's RUNNING and COLLECTING (which the head writes as
    the node tells it, while the attempt runs: a warning brought only by the outcome would come after them),
    naming the node and the attempt."""
    from agentcompass.testing.scripted_models import ScriptedModel

    from tests.helpers.threaded_upstream import upstream_in_thread
    from tests.ray.conftest import probe_path

    out = tmp_path / "ray"
    with upstream_in_thread(ScriptedModel()) as up:
        proc = run_cli(cluster, "run", "stream_probe", "none", "openai-compatible/probe", "--model-base-url",
                       up.base_url, "--model-api-key-env", "ACRAY_PROBE_KEY", "-b", "warn=line 3 is torn",
                       *on_cluster(cluster), "-o", str(out),
                       env={"ACRAY_PROBE_KEY": up.api_key, "PYTHONPATH": probe_path(cluster)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    logged = records(out / "logs.jsonl")
    told = [(e["event"], e.get("phase") or e.get("line")) for e in logged
            if e.get("event") in ("task.phase", "probe.damaged_record")]
    assert told == [("task.phase", "PREPARING"), ("task.phase", "RUNNING"), ("probe.damaged_record", 1),
                    ("probe.damaged_record", 2), ("task.phase", "COLLECTING"), ("task.phase", "EVALUATING"),
                    ("task.phase", "FINISHED")], told
    warned = [e for e in logged if e.get("event") == "probe.damaged_record"]
    (node,) = {e["node"] for e in warned}
    (finished,) = log_events(out, "ray.finished")
    assert list(finished["attempts_by_node"]) == [node]
    assert {(e["level"], e["detail"], e["path"], e["task_id"], e["attempt"]) for e in warned} == {
        ("warning", "line 3 is torn", "records.jsonl", "probe", 1)}


def slow_responder(seconds: float, in_flight: list[int] | None = None) -> Any:
    """The mock model, answering after ``seconds``; ``in_flight`` (now, most) counts requests open at once."""
    async def respond(request: dict[str, Any]) -> Any:
        if in_flight is not None:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        try:
            await asyncio.sleep(seconds)
            return await mock_responder(request)
        finally:
            if in_flight is not None:
                in_flight[0] -= 1

    return respond


def test_a_node_that_joins_mid_run_is_given_attempts(cluster: LocalCluster, tmp_path: Path) -> None:
    joining_ip = "127.0.0.5"
    out = tmp_path / "ray"
    # Two CPUs an attempt: the head and worker nodes hold 2 attempts each, fewer than the 6 asked for.
    with LoopbackOpenAI(slow_responder(1.0), api_key=None) as server:
        proc = start_cli(cluster, "run", "example_interactive", "none", "openai-compatible/mock",
                         "--model-base-url", server.base_url, "--seed", "6", "--trials", "4", "-c", "6",
                         *on_cluster(cluster), "--executor-arg", "num_cpus=2", "-o", str(out))
        joined = None
        try:
            wait_until(lambda: len(server.requests) >= 4, 120, "the run to start")
            joined = cluster.add_worker(joining_ip, cpus=4)
            cluster.wait_for(3)
            stdout, stderr = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
            if joined is not None:
                joined.kill()
                cluster.nodes.remove(joined)
    assert proc.returncode == 0, stdout + stderr
    (grown,) = log_events(out, "ray.nodes_joined")
    assert grown["nodes"] == [joining_ip] and grown["slots"] == [2]
    (finished,) = log_events(out, "ray.finished")
    assert finished["attempts_by_node"].get(joining_ip, 0) > 0, finished
    results = records(out / "results.jsonl")
    assert len(results) == 44 and {r["status"] for r in results} == {"COMPLETED"}


SUITE = """
[defaults]
benchmark = "example_interactive"
harness = "none"
model = "openai-compatible/mock"
model_base_url = "{url}"
limit = 3
executor = "ray"
executor_args = {{ address = "{address}", node_ip = "{head}" }}

[matrix]
seed = [1, 2, 3, 4]
name = "c{{seed}}"
"""


def test_a_suite_on_the_cluster_holds_its_shared_concurrency(cluster: LocalCluster, tmp_path: Path) -> None:
    out, events, suite = tmp_path / "suite", tmp_path / "events.jsonl", tmp_path / "suite.toml"
    requests = [0, 0]
    with LoopbackOpenAI(slow_responder(0.4, requests), api_key=None) as server:
        suite.write_text(SUITE.format(url=server.base_url, address=cluster.address, head=HEAD_IP))
        proc = run_cli(cluster, "suite", "run", str(suite), "-c", "2", "-o", str(out), "--json",
                       env={VARIABLE: str(events)}, testing=True, timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in out.iterdir() if (p / "summary.json").exists()) == ["c1", "c2", "c3", "c4"]
    for cell in ("c1", "c2", "c3", "c4"):
        assert len(records(out / cell / "results.jsonl")) == 3
        (finished,) = log_events(out / cell, "ray.finished")
        assert sum(finished["attempts_by_node"].values()) == 3
    # On the nodes: never more than two attempts waiting on their model at once; on the head: never more
    # than two attempts between their first phase change and FINISHED.
    assert requests[0] == 0 and 1 <= requests[1] <= 2, requests
    now = most = 0
    for e in records(events):
        if e["kind"] == "task" and e["event"] == "task.phase":
            now += e["previous"] == "PENDING"
            most = max(most, now)
            now -= e["phase"] == "FINISHED"
    assert most == 2


def test_a_cluster_run_replays_offline_and_a_shared_cache_answers_the_second_run(
        cluster: LocalCluster, tmp_path: Path) -> None:
    common = ["example_interactive", "none", "openai-compatible/mock", "--seed", "8", "-c", "4",
              *on_cluster(cluster)]
    cache = tmp_path / "cache"
    with LoopbackOpenAI(api_key=None) as server:
        first = run_cli(cluster, "run", *common, "--model-base-url", server.base_url, "--cache", str(cache),
                        "-o", str(tmp_path / "first"))
        assert first.returncode == 0, first.stdout + first.stderr
        asked = len(server.requests)
        assert asked > 11
        second = run_cli(cluster, "run", *common, "--model-base-url", server.base_url, "--cache", str(cache),
                         "-o", str(tmp_path / "second"))
        assert second.returncode == 0, second.stdout + second.stderr
        assert len(server.requests) == asked  # the second run's calls, made on the nodes, came from the cache
    assert comparable(tmp_path / "second") == comparable(tmp_path / "first")
    # Offline: the provider is gone; every call the nodes make is answered on the head from the recording.
    replayed = run_cli(cluster, "run", *common, "--model-base-url", "http://127.0.0.1:9/v1", "--replay",
                       str(tmp_path / "first"), "-o", str(tmp_path / "replayed"))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert comparable(tmp_path / "replayed") == comparable(tmp_path / "first")
    (finished,) = log_events(tmp_path / "replayed", "ray.finished")
    assert sum(finished["attempts_by_node"].values()) == 11
    def replies(run: str) -> list[tuple[Any, ...]]:
        calls = records(tmp_path / run / "trajectories.jsonl")
        return sorted((c["task_id"], c["trial"], c["attempt"], c["index"], repr(c["response"])) for c in calls)

    assert replies("replayed") == replies("first") and replies("first")
