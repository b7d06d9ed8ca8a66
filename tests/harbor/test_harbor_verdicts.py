"""Harbor tasks score what Harbor scores (issue 20, items 1-4), with real Docker and real task directories:

1. the container settings Harbor gives its containers (Docker's default capabilities: ``apt-get`` works as
   root), while every other benchmark keeps the hardened defaults and ``--env-arg`` still wins;
2. an image built FROM a base that was rebuilt under the same tag is built again (the cache key holds the
   base's image id), and a reused image is logged;
3. a task's declared ``[verifier] timeout_sec``, ``[agent] timeout_sec`` and ``build_timeout_sec`` apply, over
   the phases' defaults (an explicit ``--phase-timeout`` or ``--env-arg build_timeout`` still wins);
4. each task starts as soon as its own image is ready, and builds run at most ``builds`` at once.
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime import TaskStatus
from agentcompass.testing import run_benchmark

from tests.harbor.taskdirs import REWARD_BY_EXIT, write_task
from tests.helpers.docker_engine import require_engine

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def engine() -> None:
    require_engine()


def _events(run: Any, name: str) -> list[dict[str, Any]]:
    return [e for e in run.jsonl("logs.jsonl") if e.get("event") == name]


def _remove_images(*refs: str) -> None:
    for ref in refs:
        subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True, timeout=120)


def _built_images(run: Any) -> list[str]:
    return [str(e["image"]) for e in _events(run, "docker.image_built")]


def harbor_by_hand(task: Path, *flags: str) -> str:
    """The task's verdict in a container with Harbor 0.25's settings, made by hand: ``docker build`` of its
    environment, then ``docker run`` as Harbor's compose service runs (Docker's default capabilities, a bridge
    network for ``public``, no process limit), plus ``flags``; the solution, then the tests, as root. The
    reward file's text."""
    image = subprocess.run(["docker", "build", "-q", str(task / "environment")], capture_output=True, text=True,
                           timeout=300, check=True).stdout.strip()
    script = ("mkdir -p /logs/verifier /app && cd /app && bash /solution/solve.sh >/dev/null 2>&1; "
              "bash /tests/test.sh >/dev/null 2>&1; cat /logs/verifier/reward.txt")
    done = subprocess.run(["docker", "run", "--rm", "--network", "bridge", *flags,
                           "-v", f"{task / 'solution'}:/solution:ro", "-v", f"{task / 'tests'}:/tests:ro",
                           image, "sh", "-c", script], capture_output=True, text=True, timeout=300)
    return done.stdout.strip()


# -- 1. capabilities ---------------------------------------------------------------------------------------


async def test_a_solution_that_installs_a_package_as_root_scores_1(tmp_path: Path) -> None:
    """TB2's reference solutions (and every TB2 test.sh) run ``apt-get install``: under Harbor's container
    settings that works; under the hardened defaults apt's privilege drop fails (``setgroups 65534 failed``)."""
    root = tmp_path / "tasks"
    write_task(
        root, "install-a-tool",
        instruction="Install the `tree` command.",
        toml='[verifier]\ntimeout_sec = 120.0\n[agent]\ntimeout_sec = 300.0\n',
        dockerfile=f"FROM python:3.11-slim\nLABEL test.nonce={secrets.token_hex(6)}\nWORKDIR /app\n",
        solve="apt-get update -qq && apt-get install -y -qq --no-install-recommends tree\n",
        test="tree --version\n" + REWARD_BY_EXIT,
    )
    run = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                              run_dir=tmp_path / "harbor")
    try:
        result = run.result("install-a-tool")
        assert result.status is TaskStatus.COMPLETED, result.error
        assert result.metrics["reward"] == 1.0, result.artifacts
        # --env-arg still wins: the hardened settings asked for explicitly make the same solution fail.
        hardened = await run_benchmark("harbor", "oracle", environment="docker",
                                       benchmark_args={"path": str(root)}, environment_args={"security": "hardened"},
                                       run_dir=tmp_path / "hardened")
        failed = hardened.result("install-a-tool")
        assert failed.metrics.get("reward") == 0.0, failed.error
        assert "setgroups" in failed.artifacts["oracle"]["output_tail"]
        # the same verdicts in containers made by hand: Harbor's settings, and the hardened flags
        assert harbor_by_hand(root / "install-a-tool") == "1"
        assert harbor_by_hand(root / "install-a-tool", "--cap-drop", "ALL", "--security-opt", "no-new-privileges") == "0"
    finally:
        _remove_images(*_built_images(run))


# -- 2. stale images ---------------------------------------------------------------------------------------


async def test_a_rebuilt_base_image_is_not_served_from_a_stale_build(tmp_path: Path) -> None:
    base = f"agentcompass-test-base-{secrets.token_hex(4)}:latest"
    root = tmp_path / "tasks"
    write_task(
        root, "needs-new-base",
        instruction="Nothing to do: the environment must hold version 2 of the base.",
        toml="[verifier]\ntimeout_sec = 60.0\n",
        dockerfile=f"FROM {base}\nWORKDIR /app\n",
        solve="true\n",
        test='[ "$(cat /opt/base-version)" = "2" ]\n' + REWARD_BY_EXIT,
    )

    def build_base(version: int) -> None:
        context = tmp_path / f"base-{version}"
        context.mkdir()
        (context / "Dockerfile").write_text(f"FROM python:3.11-slim\nRUN echo {version} > /opt/base-version\n")
        subprocess.run(["docker", "build", "-q", "-t", base, str(context)], check=True, capture_output=True,
                       timeout=300)

    built: list[str] = []
    try:
        build_base(1)
        first = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                                    run_dir=tmp_path / "first")
        built += _built_images(first)
        assert first.result("needs-new-base").metrics == {"reward": 0.0}
        build_base(2)  # the same tag, another image: Harbor (rebuilding) sees version 2
        second = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                                     run_dir=tmp_path / "second")
        built += _built_images(second)
        assert second.result("needs-new-base").metrics == {"reward": 1.0}, second.result("needs-new-base").error
        assert len(_built_images(second)) == 1
        # unchanged: reused, and the log says so (with the base it was built from)
        third = await run_benchmark("harbor", "nop", environment="docker", benchmark_args={"path": str(root)},
                                    run_dir=tmp_path / "third")
        assert not _built_images(third)
        reused = _events(third, "docker.image_reused")
        assert [e["image"] for e in reused] == _built_images(second)
        assert reused[0]["level"] == "info" and base in str(reused[0]["bases"])
    finally:
        _remove_images(*built, base)


# -- 3. declared timeouts ------------------------------------------------------------------------------------


async def test_declared_timeouts_apply_over_the_phase_defaults(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The phases' defaults are made short here (as 600 s is short of TB2's 900 s verifiers): a task that
    declares more gets what it declares; ``--phase-timeout`` given explicitly still wins."""
    from agentcompass.runtime.phases import DEFAULT_TIMEOUTS

    monkeypatch.setitem(DEFAULT_TIMEOUTS, "evaluate", 4.0)
    monkeypatch.setitem(DEFAULT_TIMEOUTS, "run", 4.0)
    root = tmp_path / "tasks"
    write_task(
        root, "slow-but-declared",
        instruction="Create /app/done.txt (it takes a while).",
        toml="[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n",
        dockerfile=None,
        solve="sleep 6\ntouch /app/done.txt\n",
        test="sleep 6\n[ -f /app/done.txt ]\n" + REWARD_BY_EXIT,
    )
    run = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                              run_dir=tmp_path / "declared")
    result = run.result("slow-but-declared")
    assert result.status is TaskStatus.COMPLETED and result.metrics == {"reward": 1.0}, result.error
    explicit = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                                   phase_timeouts={"evaluate": 20.0, "run": 3.0}, run_dir=tmp_path / "explicit")
    cut = explicit.result("slow-but-declared")
    assert cut.status is TaskStatus.RUN_ERROR and "3" in (cut.error or ""), cut.error


async def test_a_declared_build_timeout_bounds_the_build(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    write_task(
        root, "slow-build",
        instruction="Nothing.",
        toml="[environment]\nbuild_timeout_sec = 2.0\n",
        dockerfile=f"FROM python:3.11-slim\nRUN echo {secrets.token_hex(6)} && sleep 30\n",
        solve="true\n",
        test="echo 1 > /logs/verifier/reward.txt\n",
    )
    run = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                              run_dir=tmp_path / "run")
    result = run.result("slow-build")
    assert result.status is TaskStatus.PREPARE_ERROR, result
    assert "longer than 2 s" in (result.error or "") and "build_timeout" in (result.error or "")
    assert run.summary["duration_s"] < 25


# -- 4. cold start -------------------------------------------------------------------------------------------


async def test_each_task_starts_when_its_own_image_is_ready(tmp_path: Path) -> None:
    nonce = secrets.token_hex(6)
    root = tmp_path / "tasks"
    quick = "FROM python:3.11-slim\nLABEL test.nonce={nonce}-{name}\nWORKDIR /app\n"
    slow = "FROM python:3.11-slim\nRUN echo {nonce}-{name} && sleep 12\nWORKDIR /app\n"
    for name, dockerfile in (("a-quick", quick), ("b-slow", slow), ("c-slow", slow), ("d-slow", slow)):
        write_task(root, name, instruction="Nothing.", dockerfile=dockerfile.format(nonce=nonce, name=name),
                   solve="true\n", test="echo 1 > /logs/verifier/reward.txt\n")
    run = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                              environment_args={"builds": "1"}, concurrency=4, run_dir=tmp_path / "run")
    try:
        assert all(run.result(t).metrics == {"reward": 1.0} for t in ("a-quick", "b-slow", "c-slow", "d-slow"))
        logs = run.jsonl("logs.jsonl")
        first_running = next(i for i, e in enumerate(logs) if e.get("event") == "task.phase"
                             and e.get("phase") == "RUNNING" and e.get("task_id") == "a-quick")
        slow_built = [i for i, e in enumerate(logs) if e.get("event") == "docker.image_built"
                      and "slow" in str(e.get("context"))]
        assert len(slow_built) == 3 and first_running < min(slow_built)  # a-quick ran before any slow image
        # builds=1: one build at a time (each build's start comes after the previous one's end)
        spans = [(e.get("event"), e.get("context")) for e in logs
                 if e.get("event") in ("docker.image_building", "docker.image_built")]
        assert [kind for kind, _ in spans] == ["docker.image_building", "docker.image_built"] * 4, spans
    finally:
        _remove_images(*_built_images(run))
