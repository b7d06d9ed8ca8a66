"""``--executor ray`` against a real two-node Ray cluster on loopback (see ``conftest.py``), through the real CLI.

The head node (127.0.0.2) runs the ``agentcompass run`` driver; the worker node (127.0.0.3) alone advertises
the ``docker`` resource. Every run is compared with the local executor, or checked for what the executor
promises: attempts on both nodes, a killed worker's attempts retried once each, Ctrl-C closing containers on
the worker, and the provider key never in any file Ray wrote.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from agentcompass.testing.scripted_models import LoopbackOpenAI, mock_responder

from tests.helpers.docker_engine import require_engine
from tests.helpers.ray_cluster import LocalCluster
from tests.helpers.ray_runs import (
    HEAD_IP,
    WORKER_IP,
    comparable,
    log_events,
    node_workers,
    on_cluster,
    records,
    run_cli,
    start_cli,
)

pytestmark = pytest.mark.ray


def slow_responder(seconds: float) -> Any:
    async def respond(request: dict[str, Any]) -> Any:
        await asyncio.sleep(seconds)
        return await mock_responder(request)

    return respond


def run_containers(run_id: str) -> list[str]:
    from python_on_whales import docker

    return [c.id for c in docker.container.list(all=True, filters=[("label", f"agentcompass.run_id={run_id}")])]


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_plugins_list_shows_the_ray_executor() -> None:
    proc = run_cli(None, "plugins", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    plugins = {p["name"]: p for p in json.loads(proc.stdout)}
    assert plugins["ray"]["registers"] == {"executor": ["ray"]} and plugins["ray"]["error"] is None


def test_example_interactive_gives_the_local_executors_results_over_both_nodes(
        cluster: LocalCluster, tmp_path: Path) -> None:
    common = ["example_interactive", "none", "mock", "--seed", "11", "--trials", "2", "-c", "4"]
    local = run_cli(None, "run", *common, "-o", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    remote = run_cli(cluster, "run", *common, *on_cluster(cluster), "-o", str(tmp_path / "ray"))
    assert remote.returncode == 0, remote.stderr
    expected = comparable(tmp_path / "local")
    assert len(expected) == 22
    assert comparable(tmp_path / "ray") == expected
    # The same model calls, recorded on the head (the worker holds no model client of its own).
    calls = records(tmp_path / "ray" / "trajectories.jsonl")
    assert len(calls) == len(records(tmp_path / "local" / "trajectories.jsonl"))
    assert {c["via"] for c in calls} == {c["via"] for c in records(tmp_path / "local" / "trajectories.jsonl")}
    # Both nodes ran attempts; the phase changes reached the head's log.
    (finished,) = log_events(tmp_path / "ray", "ray.finished")
    by_node = finished["attempts_by_node"]
    assert set(by_node) == {HEAD_IP, WORKER_IP} and sum(by_node.values()) == 22
    assert len([e for e in log_events(tmp_path / "ray", "task.phase") if e["phase"] == "FINISHED"]) == 22
    run = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert run["request"]["executor"] == "ray" and run["plan"]["executor"] == "ray"


@pytest.mark.parametrize(("harness", "score"), [("oracle", 1.0), ("react", 0.0)])
def test_example_coding_in_local_environments_on_the_nodes(cluster: LocalCluster, tmp_path: Path, harness: str,
                                                           score: float) -> None:
    common = ["example_coding", harness, "mock", "--seed", "3", "-c", "4"]
    local = run_cli(None, "run", *common, "-o", str(tmp_path / "local"))
    remote = run_cli(cluster, "run", *common, *on_cluster(cluster), "-o", str(tmp_path / "ray"))
    assert local.returncode == 0 and remote.returncode == 0, local.stderr + remote.stderr
    # react's prompt names the task's working directory, a fresh one each run: its answers differ run to run.
    answers = harness == "oracle"
    assert comparable(tmp_path / "ray", answers) == comparable(tmp_path / "local", answers)
    assert {r["metrics"]["score"] for r in records(tmp_path / "ray" / "results.jsonl")} == {score}
    assert len(comparable(tmp_path / "ray")) == 6


def test_an_agent_inside_a_worker_environment_reaches_the_gateway_and_its_artifacts_come_back(
        cluster: LocalCluster, tmp_path: Path) -> None:
    agent = ("python3 -c \"import json, os, urllib.request as u; "
             "r = u.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', "
             "data=json.dumps({'model': os.environ['AGENTCOMPASS_MODEL'], "
             "'messages': [{'role': 'user', 'content': 'hi'}]}).encode(), "
             "headers={'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY'], "
             "'Content-Type': 'application/json'}); "
             "print(json.load(u.urlopen(r))['choices'][0]['message']['content'])\"")
    out = tmp_path / "ray"
    proc = run_cli(cluster, "run", "example_coding", "command", "mock", "--harness-arg", f"command={agent}",
                   "-t", "roman", "-t", "fizzbuzz", *on_cluster(cluster), "-o", str(out),
                   "--gateway-host", HEAD_IP)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (ready,) = log_events(out, "ray.workers_ready")
    assert ready["gateway"].startswith(f"http://{HEAD_IP}:")  # the address --gateway-host gave
    results = records(out / "results.jsonl")
    assert [r["status"] for r in results] == ["COMPLETED", "COMPLETED"]
    calls = records(out / "trajectories.jsonl")
    assert sorted(c["task_id"] for c in calls) == ["fizzbuzz", "roman"]
    assert all(c["via"] == "gateway" and c["error"] is None for c in calls)
    replies = {c["task_id"]: c["response"]["content"] for c in calls}
    for r in results:  # what the program printed on its node is in the head's run directory
        stdout = out / "artifacts" / r["task_id"] / "attempt-1" / "command" / "stdout.txt"
        assert stdout.read_text().strip() == replies[r["task_id"]].strip()


@pytest.mark.docker
def test_docker_attempts_run_on_the_docker_node_with_the_local_executors_results(
        cluster: LocalCluster, tmp_path: Path) -> None:
    require_engine()
    common = ["example_coding", "oracle", "mock", "--env", "docker", "--seed", "5", "-c", "3"]
    local = run_cli(None, "run", *common, "-o", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    remote = run_cli(cluster, "run", *common, *on_cluster(cluster), "-o", str(tmp_path / "ray"))
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert comparable(tmp_path / "ray") == comparable(tmp_path / "local")
    assert {r["metrics"]["score"] for r in records(tmp_path / "ray" / "results.jsonl")} == {1.0}
    (finished,) = log_events(tmp_path / "ray", "ray.finished")
    assert finished["attempts_by_node"] == {WORKER_IP: 6}  # only that node advertises docker
    run_id = json.loads((tmp_path / "ray" / "run.json").read_text())["request"]["run_id"]
    assert run_containers(run_id) == []


def test_a_killed_worker_process_has_its_attempts_retried_once_each(cluster: LocalCluster, tmp_path: Path) -> None:
    out = tmp_path / "ray"
    with LoopbackOpenAI(slow_responder(0.6), api_key=None) as server:
        proc = start_cli(cluster, "run", "example_interactive", "none", "openai-compatible/mock",
                         "--model-base-url", server.base_url, "--seed", "2", "-c", "4", "--retries", "2",
                         *on_cluster(cluster), "-o", str(out))
        try:
            wait_until(lambda: node_workers(cluster, WORKER_IP) and len(server.requests) >= 4, 90,
                       "attempts on the worker node")
            (victim,) = node_workers(cluster, WORKER_IP)
            import os

            os.kill(victim, signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, stdout + stderr
    results = records(out / "results.jsonl")
    assert sorted(r["task_id"] for r in results) == sorted({r["task_id"] for r in results})  # one final each
    assert len(results) == 11 and {r["status"] for r in results} == {"COMPLETED"}
    lost = records(out / "attempts.jsonl")
    assert lost and all("was lost mid-attempt" in r["error"] and r["status"] == "RUN_ERROR" for r in lost)
    retried = {(r["task_id"], r["attempt"] + 1) for r in lost}
    assert retried <= {(r["task_id"], r["attempt"]) for r in results}
    assert len(log_events(out, "ray.worker_lost")) == len(lost)
    assert log_events(out, "ray.workers_restarted")  # the node is alive: a new worker took the slots
    # Nothing recorded twice: each call of each attempt once, in order.
    keys = [(c["task_id"], c["trial"], c["attempt"], c["index"]) for c in records(out / "trajectories.jsonl")]
    assert len(keys) == len(set(keys))


def test_a_node_that_dies_mid_run_has_its_attempts_retried_elsewhere(cluster: LocalCluster, tmp_path: Path) -> None:
    doomed_ip = "127.0.0.4"
    doomed = cluster.add_worker(doomed_ip, cpus=2)
    try:
        cluster.wait_for(3)
        out = tmp_path / "ray"
        with LoopbackOpenAI(slow_responder(0.6), api_key=None) as server:
            proc = start_cli(cluster, "run", "example_interactive", "none", "openai-compatible/mock",
                             "--model-base-url", server.base_url, "--seed", "4", "-c", "6", "--retries", "1",
                             *on_cluster(cluster), "-o", str(out))
            try:
                wait_until(lambda: node_workers(cluster, doomed_ip) and len(server.requests) >= 6, 90,
                           "attempts on the doomed node")
                doomed.kill()  # the whole node: raylet, its workers, everything under its ray start
                stdout, stderr = proc.communicate(timeout=180)
            finally:
                if proc.poll() is None:
                    proc.kill()
    finally:
        doomed.kill()
        cluster.nodes.remove(doomed)
    assert proc.returncode == 0, stdout + stderr
    results = records(out / "results.jsonl")
    assert len(results) == 11 == len({r["task_id"] for r in results}) and {r["status"] for r in results} == {
        "COMPLETED"}
    lost = log_events(out, "ray.worker_lost")
    assert lost and {e["node"] for e in lost} == {doomed_ip}
    assert len(records(out / "attempts.jsonl")) == len(lost)  # each lost attempt once, then retried
    keys = [(c["task_id"], c["trial"], c["attempt"], c["index"]) for c in records(out / "trajectories.jsonl")]
    assert len(keys) == len(set(keys))


@pytest.mark.docker
def test_ctrl_c_cancels_remote_attempts_closes_their_containers_and_resume_finishes(
        cluster: LocalCluster, tmp_path: Path) -> None:
    require_engine()
    out = tmp_path / "ray"
    with LoopbackOpenAI(slow_responder(1.0), api_key=None) as server:
        common = ["--model-base-url", server.base_url, *on_cluster(cluster)]
        proc = start_cli(cluster, "run", "example_coding", "react", "openai-compatible/mock", "--env", "docker",
                         "-c", "3", *common, "-o", str(out))
        try:
            wait_until(lambda: (out / "run.json").exists(), 120, "the run to start")
            run_id = json.loads((out / "run.json").read_text())["request"]["run_id"]
            wait_until(lambda: len(run_containers(run_id)) >= 2, 120, "containers on the worker")
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, stdout + stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["interrupted"] is True
        cancelled = [r for r in records(out / "attempts.jsonl") if r["status"] == "CANCELLED"]
        assert cancelled  # the attempts in flight, recorded as cancelled on the head
        assert run_containers(run_id) == []  # closed on the worker before the run ended
        assert node_workers(cluster, WORKER_IP) == [] and node_workers(cluster, HEAD_IP) == []
        finished_before = {r["task_id"] for r in records(out / "results.jsonl")}
        resumed = run_cli(cluster, "run", "--resume", str(out), *common)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    results = records(out / "results.jsonl")
    assert sorted(r["task_id"] for r in results) == sorted({r["task_id"] for r in results})
    assert len(results) == 6 and finished_before <= {r["task_id"] for r in results}
    assert run_containers(run_id) == []


def test_a_worker_without_a_plugin_the_run_needs_is_a_clear_error_before_any_attempt(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # The testing plugin exists only in the head's process (tests.helpers.cli adds it): no node has it.
    out = tmp_path / "ray"
    proc = run_cli(cluster, "run", "plain", "nop", "mock", *on_cluster(cluster), "-o", str(out), testing=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "some Ray nodes cannot run this run" in proc.stderr
    assert f"node {HEAD_IP}" in proc.stderr and f"node {WORKER_IP}" in proc.stderr
    assert "unknown benchmark 'plain'" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()  # checked before anything was written


def test_bad_executor_options_are_usage_errors() -> None:
    for arg, says in (("nope=1", "has no option(s) nope"), ("num_cpus=x", "num_cpus='x': not a number"),
                      ("resources=[1]", "must be a JSON object")):
        proc = run_cli(None, "run", "example_interactive", "none", "mock", "--executor", "ray",
                       "--executor-arg", arg)
        assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_the_provider_key_never_reaches_ray(cluster: LocalCluster, tmp_path: Path) -> None:
    key = "sk-acray-" + secrets.token_hex(16)
    out = tmp_path / "ray"
    with LoopbackOpenAI(api_key=key) as server:
        proc = run_cli(cluster, "run", "example_interactive", "none", "openai-compatible/mock", "--model-base-url",
                       server.base_url, "--model-api-key-env", "ACRAY_TEST_KEY", *on_cluster(cluster),
                       "-o", str(out), env={"ACRAY_TEST_KEY": key})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert server.auth_headers and set(server.auth_headers) == {f"Bearer {key}"}  # the head used it
    assert key not in proc.stdout + proc.stderr
    files = [*cluster.files(), *(p for p in out.rglob("*") if p.is_file())]
    assert len(files) > 20
    leaked = [str(p) for p in files if key.encode() in p.read_bytes() or key[9:25].encode() in p.read_bytes()]
    assert leaked == []
    for node in cluster.nodes:  # nor in the environment of any Ray process
        for pid in node.pids():
            try:
                assert key.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass


def test_without_an_address_a_local_instance_runs_and_goes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    temp = Path(subprocess.check_output(["mktemp", "-d", "/tmp/acrayl.XXXX"], text=True).strip())
    key = "sk-acray-" + secrets.token_hex(16)
    with LoopbackOpenAI(api_key=key) as server:
        proc = run_cli(None, "run", "example_interactive", "none", "openai-compatible/mock", "--model-base-url",
                       server.base_url, "--model-api-key-env", "ACRAY_TEST_KEY", "--executor", "ray",
                       "--executor-arg", f"temp_dir={temp}", "-o", str(out), "-c", "3",
                       env={"ACRAY_TEST_KEY": key, "HOME": str(tmp_path / "home")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (tmp_path / "home" / ".ray").exists()  # its token was its own, gone with it
    assert json.loads((out / "summary.json").read_text())["status_counts"] == {"COMPLETED": 11}
    files = [p for p in temp.rglob("*") if p.is_file()]
    assert files and not [p for p in files if key.encode() in p.read_bytes()]
    # The instance stopped with the run: no process names its temp directory any more.
    from tests.helpers.ray_cluster import cmdline

    assert not [e.name for e in Path("/proc").iterdir() if e.name.isdigit() and str(temp) in cmdline(int(e.name))]
    shutil.rmtree(temp, ignore_errors=True)


def test_without_an_address_a_cluster_this_machine_names_is_not_joined(tmp_path: Path) -> None:
    """A cluster `ray start` left named on this machine (here RAY_ADDRESS, as a dead one's
    /tmp/ray/ray_current_cluster would) is not what a run without ``address=`` joins: it starts its own."""
    temp = Path(subprocess.check_output(["mktemp", "-d", "/tmp/acrayl.XXXX"], text=True).strip())
    try:
        proc = run_cli(None, "run", "example_interactive", "none", "mock", "--executor", "ray", "--executor-arg",
                       f"temp_dir={temp}", "-o", str(tmp_path / "run"), "-c", "2",
                       env={"RAY_ADDRESS": "127.0.0.1:9", "HOME": str(tmp_path / "home")})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["status_counts"] == {"COMPLETED": 11}
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def test_a_claude_like_client_on_the_worker_is_passed_through_and_streamed_by_the_head(
        cluster: LocalCluster, tmp_path: Path) -> None:
    """An Anthropic SDK client in a ``command`` run on the worker node, against an Anthropic-protocol provider:
    the provider gets what it sent (thinking signature, cache_control), the stream arrives as the provider
    produced it (paused 50 ms between pieces), and the call is recorded on the head as a passthrough."""
    import sys

    from agentcompass.testing.scripted_models import ScriptedModel, scripted, text

    from tests.helpers.threaded_upstream import CLAUDE_LIKE, upstream_in_thread

    script = tmp_path / "claude_like.py"
    script.write_text(CLAUDE_LIKE)
    out = tmp_path / "ray"
    with upstream_in_thread(ScriptedModel(scripted(text("abcde" * 20))), piece=5, delay=0.05) as up:
        proc = run_cli(cluster, "run", "example_coding", "command", "anthropic/claude-up", "--model-base-url",
                       up.root, "--harness-arg", f"command={sys.executable} {script} 4000", "-t", "roman",
                       *on_cluster(cluster), "--executor-arg", "num_cpus=0", "-o", str(out),
                       env={"ANTHROPIC_API_KEY": up.api_key})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        requests = list(up.requests)
    (result,) = records(out / "results.jsonl")
    stdout = out / "artifacts" / "roman" / "attempt-1" / "command" / "stdout.txt"
    printed = json.loads(stdout.read_text().strip().splitlines()[-1])
    assert printed["text"] == "abcde" * 20 and printed["spread"] > 0.5, printed
    (request,) = requests
    assert request.path == "/v1/messages" and request.body["model"] == "claude-up"
    assert request.body["messages"][1]["content"][0]["signature"] == "sig-abc=="
    assert request.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert request.body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    (call,) = records(out / "trajectories.jsonl")
    assert (call["protocol"], call["passthrough"], call["via"]) == ("anthropic", True, "gateway")
    assert result["status"] == "COMPLETED"



def test_an_in_process_client_on_a_node_makes_the_local_calls_and_its_stream_arrives_piece_by_piece(
        cluster: LocalCluster, tmp_path: Path) -> None:
    """A Python benchmark's own ``chat`` and ``stream`` on a node (the ``stream_probe`` plugin, installed on
    every node): the provider receives what a local run sends it (every setting), the calls are recorded as
    local in-process ones, and the first streamed piece reaches the node before the provider ends its stream."""
    from agentcompass.testing.scripted_models import ScriptedModel, scripted, text

    from tests.helpers.stream_probe_plugin import SETTINGS
    from tests.helpers.threaded_upstream import TimedUpstream, upstream_in_thread
    from tests.ray.conftest import probe_path
    from tests.ray.test_remote_seam import comparable_calls

    answer = "abcde" * 20
    sent: dict[str, list[Any]] = {}
    for where in ("local", "ray"):
        model = ScriptedModel(scripted(text("whole"), text(answer)))
        with upstream_in_thread(model, kind=TimedUpstream, piece=5, delay=0.05) as up:
            assert isinstance(up, TimedUpstream)
            proc = run_cli(cluster if where == "ray" else None, "run", "stream_probe", "none",
                           "openai-compatible/probe", "--model-base-url", up.base_url,
                           "--model-api-key-env", "ACRAY_PROBE_KEY", "--seed", "3",
                           *(on_cluster(cluster) if where == "ray" else []), "-o", str(tmp_path / where),
                           env={"ACRAY_PROBE_KEY": up.api_key, "PYTHONPATH": probe_path(cluster)})
            assert proc.returncode == 0, proc.stdout + proc.stderr
            sent[where] = [(r.path, r.body) for r in up.requests]
            (stream_ended,) = up.ended[1:]
        (result,) = records(tmp_path / where / "results.jsonl")
        assert (result["status"], result["final_answer"]) == ("COMPLETED", f"whole|{answer}")
        pieces = json.loads((tmp_path / where / "artifacts" / "probe" / "attempt-1" / "pieces.json").read_text())
        # Piece by piece (20 of them, 50 ms apart): the first arrived while the provider was still streaming.
        assert "".join(p for _, p in pieces) == answer and len(pieces) >= 10, pieces
        assert stream_ended - pieces[0][0] > 0.5, (stream_ended, pieces[0][0])
    assert sent["ray"] == sent["local"]
    for _, body in sent["ray"]:
        assert {k: body.get(k) for k in SETTINGS} == SETTINGS
    assert comparable_calls(tmp_path / "ray") == comparable_calls(tmp_path / "local")
    assert [c["via"] for c in comparable_calls(tmp_path / "ray")] == ["client", "client"]
