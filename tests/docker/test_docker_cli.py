"""``--env docker`` end to end through the real CLI: a run of the example benchmark whose runner reaches the
model gateway from inside network-less containers, Ctrl-C (once or twice) clean-up, and ``env prune`` after
a SIGKILL."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli_processes import ROOT, run_cli_subprocess
from tests.helpers.docker_engine import host_processes_mentioning, require_engine, run_containers, wait_until

pytestmark = pytest.mark.docker


def _start_run(output: Path, *extra: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "agentcompass.cli.main",
        "run",
        "example_interactive",
        "none",
        "mock",
        "--env",
        "docker",
        "-o",
        str(output),
        *extra,
    ]
    return subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def _wait_for_containers(output: Path, proc: subprocess.Popen[str], timeout: float = 60, engine: str = "docker") -> str:
    """The run's id, once at least one of its containers exists (on ``engine``)."""

    def run_id_with_containers() -> str | None:
        assert proc.poll() is None, proc.communicate()
        run_json = output / "run.json"
        if not run_json.exists():
            return None
        with open(run_json) as f:
            run_id = json.load(f)["run_id"]
        return run_id if run_containers(run_id, engine) else None

    run_id = wait_until(run_id_with_containers, timeout, "the run started a container")
    assert run_id is not None
    return run_id


def _pool_containers(run_id: str) -> list[str]:
    from python_on_whales import docker

    filters = [("label", f"agentcompass.run_id={run_id}"), ("label", "agentcompass.pool=1")]
    return [c.id for c in docker.container.list(all=True, filters=filters)]


def _exec_dirs_of(run_id: str) -> list[Path]:
    """The exec-server socket directories a run made (each names its run in ``owner.json``)."""
    from agentcompass.runtime.owned_dirs import read_owner
    from agentcompass_docker.exec_dirs import PREFIX, base_dir

    return [entry for entry in base_dir().glob(f"{PREFIX}*") if (read_owner(entry) or {}).get("run_id") == run_id]


@pytest.mark.parametrize("exec_mode", ["server", "docker"])
def test_example_interactive_runs_in_docker(engine, tmp_path: Path, exec_mode: str) -> None:
    out = tmp_path / "run"
    proc = run_cli_subprocess(
        "run",
        "example_interactive",
        "none",
        "mock",
        "--env",
        "docker",
        "--env-arg",
        f"exec={exec_mode}",
        "-c",
        "2",
        "-o",
        str(out),
        "--json",
        testing=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["environment"] == "docker"
    assert summary["status_counts"] == {"COMPLETED": summary["n_tasks"]} and summary["n_tasks"] > 0
    # The upstream runner inside each container called the model through the gateway forwarder.
    calls = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert calls and all(call["via"] == "gateway" for call in calls if call.get("role") == "agent")
    assert run_containers(summary["run_id"]) == []
    assert _exec_dirs_of(summary["run_id"]) == []
    events = [json.loads(line).get("event") for line in (out / "logs.jsonl").read_text().splitlines()]
    assert ("docker.pool_planned" in events) == (exec_mode == "server")  # -c 2: a pool of 2 on the server path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_removes_the_runs_containers(engine, tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "run"
    proc = _start_run(out, "-c", "4")  # the server path's default: a pool of 4 started at once
    try:
        run_id = _wait_for_containers(out, proc)
        wait_until(lambda: _pool_containers(run_id), 60, "the run's warm pool has a container")
        os.killpg(proc.pid, sig)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert run_containers(run_id) == []
    assert _exec_dirs_of(run_id) == []


def test_double_ctrl_c_removes_every_container(engine, tmp_path: Path) -> None:
    """The second signal arrives while the first one's clean-up runs and creates are still in flight."""
    out = tmp_path / "run"
    proc = _start_run(out, "-c", "8")
    try:
        run_id = _wait_for_containers(out, proc)  # the first exists; others are being created right now
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.03)  # the scenario itself: a second Ctrl-C 30 ms after the first
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130
    assert run_containers(run_id) == []


def test_env_prune_removes_what_a_killed_run_left(engine, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start_run(out, "-c", "4")
    try:
        run_id = _wait_for_containers(out, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # The docker CLI runs in sessions of its own, so a `docker create` in flight completes after the SIGKILL:
    # count once none is left.
    wait_until(lambda: not host_processes_mentioning(run_id), 60, "no docker call of the killed run is in flight")
    left = len(run_containers(run_id))
    assert left > 0  # nothing ran the clean-up
    assert _exec_dirs_of(run_id)  # the killed run's socket directories are left too
    pruned = run_cli_subprocess("env", "prune", "--env", "docker", "--run-id", run_id, testing=False)
    assert pruned.returncode == 0, pruned.stderr
    assert f"removed {left} docker environment(s) of run {run_id}" in pruned.stdout
    assert run_containers(run_id) == []
    assert _exec_dirs_of(run_id) == []


def test_env_prune_keeps_the_containers_of_a_live_process_and_says_so(engine) -> None:
    """Issue 32, item 6: ``env prune`` without ``--run-id`` removes a container whose owner process is gone, and
    keeps (naming it) one whose owner still runs: this test's own process."""
    import secrets

    from agentcompass_docker.containers import LABEL_MANAGED, LABEL_OWNER, LABEL_RUN, owner_label
    from python_on_whales import docker

    from tests.helpers.docker_engine import IMAGE

    gone = subprocess.Popen(["sleep", "60"])
    dead_owner = owner_label(gone.pid)  # read while it runs, as a run labels its containers
    gone.kill()
    gone.wait()
    tag = secrets.token_hex(4)
    live_run, dead_run = f"test-live-{tag}", f"test-dead-{tag}"
    made = {}
    try:
        for run, owner in ((live_run, owner_label()), (dead_run, dead_owner)):
            made[run] = docker.run(IMAGE, ["sleep", "300"], detach=True, name=f"ac-{run}",
                                   labels={LABEL_MANAGED: "1", LABEL_RUN: run, LABEL_OWNER: owner})
        pruned = run_cli_subprocess("env", "prune", "--env", "docker", testing=False)
        assert pruned.returncode == 0, pruned.stderr
        assert run_containers(dead_run) == []
        assert run_containers(live_run) == [made[live_run].id]
        assert (f"kept container ac-{live_run} of run {live_run}: its process (pid {os.getpid()}) still runs"
                in pruned.stdout), pruned.stdout
        assert dead_run not in pruned.stdout
    finally:
        for container in made.values():
            docker.container.remove(container, force=True, volumes=True) if container.exists() else None


# -- on Podman (--env-arg engine=podman) ------------------------------------------------------------------------


@pytest.mark.podman
def test_example_interactive_runs_on_podman_and_env_prune_cleans_a_killed_run(tmp_path: Path) -> None:
    """The run above, on Podman: the runner inside each network-less container reaches the gateway, a pool of 2
    serves the tasks, nothing is left; then a SIGKILLed run's containers and socket directories are removed by
    ``env prune --env-arg engine=podman``."""
    require_engine("podman")
    out = tmp_path / "run"
    proc = run_cli_subprocess("run", "example_interactive", "none", "mock", "--env", "docker", "--env-arg",
                              "engine=podman", "-c", "2", "-o", str(out), "--json", testing=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status_counts"] == {"COMPLETED": summary["n_tasks"]} and summary["n_tasks"] > 0
    calls = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert calls and all(call["via"] == "gateway" for call in calls if call.get("role") == "agent")
    events = [json.loads(line).get("event") for line in (out / "logs.jsonl").read_text().splitlines()]
    assert "docker.pool_planned" in events
    assert run_containers(summary["run_id"], "podman") == [] and _exec_dirs_of(summary["run_id"]) == []

    killed = tmp_path / "killed"
    proc2 = _start_run(killed, "--env-arg", "engine=podman", "-c", "4")
    try:
        run_id = _wait_for_containers(killed, proc2, engine="podman")
    finally:
        os.killpg(proc2.pid, signal.SIGKILL)
        proc2.wait()
    wait_until(lambda: not host_processes_mentioning(run_id), 60, "no podman call of the killed run is in flight")
    left = len(run_containers(run_id, "podman"))
    assert left > 0 and _exec_dirs_of(run_id)
    pruned = run_cli_subprocess("env", "prune", "--env", "docker", "--env-arg", "engine=podman", "--run-id", run_id,
                                testing=False)
    assert pruned.returncode == 0, pruned.stderr
    # A container whose task had ended may still be on its way out (Podman removes an ended `--rm` container
    # a moment later than Docker): prune counts what it found.
    removed = re.search(rf"removed (\d+) docker environment\(s\) of run {run_id}", pruned.stdout)
    assert removed and 0 < int(removed[1]) <= left, pruned.stdout
    assert run_containers(run_id, "podman") == [] and _exec_dirs_of(run_id) == []
