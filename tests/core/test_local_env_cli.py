"""The local environment through the real ``agentcompass`` CLI (in child processes): timeouts that hold,
interrupts without tracebacks, what a SIGKILLed run leaves and ``env prune``, option errors, and downloads."""

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
from agentcompass.builtin.local import processes

from tests.helpers.cli_processes import ROOT
from tests.helpers.local_procs import (
    kill_sleeping,
    sleeping,
    start_time,
    unique_sleep,
    wait_for_sleeping,
    wait_until_gone,
)

CLI = [sys.executable, "-m", "tests.helpers.shell_cli"]
NO_TRACEBACK = ("Traceback", "exception was never retrieved", "Event loop is closed", "Task was destroyed")


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The CLI as a foreground child (SIGINT restored to its default, as a terminal's Ctrl-C would find it)."""
    return subprocess.Popen(
        [*CLI, *args], cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})}, start_new_session=False,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str, float]:
    """Wait for ``proc``; on expiry kill it (by pid) and fail."""
    started = time.monotonic()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the run was still going after {timeout}s:\n{err[-3000:]}") from None
    return out, err, time.monotonic() - started


def run_roots(directory: Path) -> list[Path]:
    """The local environment's run roots in ``directory`` (the gateway keeps its socket nearby)."""
    return sorted(p for p in directory.iterdir() if p.name.startswith("agentcompass-")
                  and not p.name.startswith("agentcompass-gw-"))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


@pytest.fixture
def duration():
    value = unique_sleep(3000)
    yield value
    kill_sleeping(value)


def test_a_run_timeout_holds_when_it_lands_in_command_start_up(tmp_path, duration):
    """24 tasks start short commands with a background child in a loop; ``--timeout 3`` cancels each somewhere
    in a command's start-up. Every task must end, promptly, and no background child may survive."""
    run_dir = tmp_path / "run"
    proc = start("run", "shell", "none", "mock", "-b", "n=24", "-b", "loop=true",
                 "-b", f"command=sleep {duration} & sleep 0.05; kill $!", "-c", "24", "--timeout", "3",
                 "-o", str(run_dir), "--env-arg", f"root={tmp_path / 'work'}")
    _, stderr, took = finish(proc, timeout=50)
    assert took < 40, f"the run took {took:.0f}s past a 3s timeout"
    assert proc.returncode == 1, stderr
    results = read_jsonl(run_dir / "results.jsonl")
    assert len(results) == 24 and all("timed out" in (r["error"] or "") for r in results), results[:2]
    assert not any(s in stderr for s in NO_TRACEBACK), stderr
    assert sleeping(duration) == [], "a background child outlived its task"
    assert list((tmp_path / "work").iterdir()) == []


def test_ctrl_c_interrupts_a_local_run_without_tracebacks(tmp_path, duration):
    run_dir = tmp_path / "run"
    proc = start("run", "shell", "none", "mock", "-b", "n=4", "-b", f"command=sleep {duration}", "-c", "4",
                 "-o", str(run_dir), "--env-arg", f"root={tmp_path / 'work'}")
    pids = wait_for_sleeping(duration, 4)
    starts = {pid: start_time(pid) for pid in pids}
    proc.send_signal(signal.SIGINT)
    _, stderr, _ = finish(proc, timeout=60)
    assert proc.returncode == 130, stderr
    for text in NO_TRACEBACK:
        assert text not in stderr, stderr
    assert wait_until_gone(starts) == [], "an interrupted task's command survived"
    assert list((tmp_path / "work").iterdir()) == []


def gateway_dirs(tmp: Path, pid: int) -> list[Path]:
    """The model-gateway socket directories the run with ``pid`` made (in TMPDIR, or in /tmp when TMPDIR is too
    long for a socket path)."""
    found = []
    for base in {tmp, Path("/tmp")}:
        for p in base.iterdir():
            if p.name.startswith("agentcompass-gw-") and (p / "owner.json").exists():
                if json.loads((p / "owner.json").read_text()).get("pid") == pid:
                    found.append(p)
    return found


def test_a_sigkilled_run_is_cleaned_up_by_env_prune_and_by_its_resume(tmp_path, duration):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}  # the local environment's default root
    flag = tmp_path / "finish-now"
    command = f"if [ -e {flag} ]; then echo done; else sleep {duration}; fi"
    args = ["run", "shell", "none", "mock", "-b", "n=2", "-b", f"command={command}", "-c", "2"]

    # A run killed outright leaves its run root (with owner.json) and its commands.
    first = start(*args, "-o", str(tmp_path / "first"), env=env)
    pids = {pid: start_time(pid) for pid in wait_for_sleeping(duration, 2)}
    first.kill()
    first.communicate(timeout=30)
    roots = run_roots(tmp)
    assert len(roots) == 1 and (roots[0] / "owner.json").exists(), roots
    owner = json.loads((roots[0] / "owner.json").read_text())
    assert owner["pid"] == first.pid and owner["run_id"]
    assert len(gateway_dirs(tmp, first.pid)) == 1  # the model gateway's socket directory is left too

    # A prune scoped to another run touches nothing; a prune of everything removes it and its processes.
    assert "removed 0 local" in run("env", "prune", "--env", "local", "--run-id", "other", env=env).stdout
    assert roots[0].exists()
    pruned = run("env", "prune", "--env", "local", env=env)
    assert pruned.returncode == 0, pruned.stderr
    assert "removed 1 local environment(s)" in pruned.stdout
    # and its gateway directory (with any other dead run's: /tmp is shared when TMPDIR is too long for sockets)
    gone = re.search(r"and (\d+) model-gateway socket director(y|ies)", pruned.stdout)
    assert gone and int(gone.group(1)) >= 1, pruned.stdout
    assert not roots[0].exists() and gateway_dirs(tmp, first.pid) == []
    assert wait_until_gone(pids) == [], "the killed run's commands survived the prune"
    own = processes.own_cgroup_dir()
    if own is not None:
        assert not list(own[0].glob(f"agentcompass-{first.pid}-*")), "the killed run's cgroup is left"

    # A resume of a killed run clears what it left, in setup.
    second = start(*args, "-o", str(tmp_path / "second"), env=env)
    wait_for_sleeping(duration, 2)
    second.kill()
    second.communicate(timeout=30)
    left = run_roots(tmp)
    assert len(left) == 1 and len(gateway_dirs(tmp, second.pid)) == 1
    flag.write_text("")
    resumed = run("run", "--resume", str(tmp_path / "second"), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert run_roots(tmp) == [] and gateway_dirs(tmp, second.pid) == []
    assert sleeping(duration) == []


def test_a_live_run_is_never_pruned(tmp_path, duration):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    proc = start("run", "shell", "none", "mock", "-b", f"command=sleep {duration}", "-o", str(tmp_path / "r"),
                 env=env)
    try:
        pids = wait_for_sleeping(duration, 1)
        assert "removed 0 local" in run("env", "prune", "--env", "local", env=env).stdout
        assert run_roots(tmp)
        assert sleeping(duration) == pids
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert "removed 1 local" in run("env", "prune", "--env", "local", env=env).stdout


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("bogus=1", "unknown local environment option 'bogus'; known: keep, processes, root"),
        ("keep=maybe", "local environment option keep='maybe': expected true or false"),
        ("processes=magic", "expected one of auto, cgroup, tree"),
    ],
)
def test_bad_env_args_are_one_line_usage_errors(tmp_path, arg, expected):
    proc = run("run", "scripted", "none", "mock", "--env-arg", arg, "-o", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "unexpected keyword argument" not in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_symlink_out_of_the_working_directory_does_not_reach_the_artifacts(tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host content")
    run_dir = tmp_path / "run"
    proc = run("run", "shell", "none", "mock", "-b", f"command=mkdir -p out && echo fine > out/ok && "
               f"ln -s {secret} out/x", "-b", "artifact=out", "-o", str(run_dir),
               "--env-arg", f"root={tmp_path / 'work'}")
    assert proc.returncode == 1, proc.stderr
    (result,) = read_jsonl(run_dir / "results.jsonl")
    assert result["status"] == "RUN_ERROR" and "out/x" in result["error"], result
    copied = [p for p in (run_dir / "artifacts").rglob("*") if p.is_file()] if (run_dir / "artifacts").exists() else []
    assert not any(p.read_text(errors="replace") == "host content" for p in copied), copied
