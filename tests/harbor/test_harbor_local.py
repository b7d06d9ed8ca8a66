"""The ``harbor`` benchmark through the real lifecycle on the ``local`` environment (the workdir layout): the
verdicts of the tasks' own verifiers under ``oracle`` and ``nop``, tampering, time limits, verifier failures,
fresh verification, and that the agent never sees the tests or the solution."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.testing import check_benchmark, run_benchmark
from agentcompass_harbor.benchmark import HarborBenchmark

from tests.harbor.taskdirs import DOCKER_ONLY, EXPECTED, separate_task, suite, write_task


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return suite(tmp_path_factory.mktemp("harbor") / "tasks")


def check_expected(run, which: int) -> None:  # type: ignore[no-untyped-def]
    """Every task ended as its verifier says (``which``: 0 for oracle, 1 for nop)."""
    seen = {}
    for task_id, outcomes in EXPECTED.items():
        if task_id in DOCKER_ONLY:
            continue
        expect = outcomes[which]
        result = run.result(task_id)
        seen[task_id] = (result.status.value, result.metrics.get("reward"))
        assert result.status.value == expect.status, (task_id, result.error)
        if expect.reward is not None:
            assert result.metrics["reward"] == expect.reward, task_id
        if expect.error is not None:
            assert expect.error in (result.error or ""), (task_id, result.error)
    assert len(seen) == len(EXPECTED) - len(DOCKER_ONLY)


async def test_oracle_gets_what_each_verifier_gives(tasks: Path, tmp_path: Path) -> None:
    run = await run_benchmark("harbor", "oracle", benchmark_args={"path": str(tasks)}, run_dir=tmp_path / "run",
                              concurrency=8)
    check_expected(run, 0)
    multi = run.result("multi-reward")
    assert multi.metrics == {"reward": 1.0, "accuracy": 1.0, "checked": 4.0}
    assert multi.artifacts["verifier"]["reward_file"] == "reward.json"
    # categories come from [metadata] difficulty
    assert run.result("hello").category == "easy" and run.result("no-reward").category == "hard"
    assert set(run.summary["metrics"]["by_category"]) == {"easy", "medium", "hard"}
    # the verifier's output is kept for a crash, in the error and in the attempt's artifacts
    crash = run.result("verifier-crash")
    assert "exit status 3" in crash.error and "starting the checks" in crash.error
    saved = run.run_dir / "artifacts" / "verifier-crash" / "attempt-1" / "verifier" / "verifier-output.txt"
    assert "Traceback: boom in the verifier" in saved.read_text()
    assert "reward" not in run.result("verifier-timeout").metrics
    # the oracle's output is kept; its time limit is the task's [agent] timeout_sec
    assert "1 s" in run.result("slow-solution").error
    assert (run.run_dir / "artifacts" / "hello" / "attempt-1" / "agent" / "oracle.txt").exists()


async def test_nop_gets_what_each_verifier_gives(tasks: Path, tmp_path: Path) -> None:
    run = await run_benchmark("harbor", "nop", benchmark_args={"path": str(tasks)}, run_dir=tmp_path / "run",
                              concurrency=8)
    check_expected(run, 1)
    assert run.result("multi-reward").metrics == {"reward": 0.0, "accuracy": 0.0, "checked": 4.0}
    assert run.exit_code == 1  # EVAL_ERRORs are errors


async def test_extra_metrics_are_aggregated_when_declared(tasks: Path, tmp_path: Path) -> None:
    run = await run_benchmark("harbor", "oracle", benchmark_args={"path": str(tasks), "metrics": "accuracy"},
                              task_ids=["multi-reward", "hello"], run_dir=tmp_path / "run")
    overall = run.summary["metrics"]["overall"]
    assert set(overall) == {"reward", "accuracy"}
    assert overall["accuracy"]["mean"] == 0.5  # hello has no accuracy: counted as missing
    assert overall["accuracy"]["n_missing"] == 1


async def test_a_reward_the_agent_prewrote_does_not_count(tasks: Path, tmp_path: Path) -> None:
    async def cheat(task, prepared, req, plan, env):  # type: ignore[no-untyped-def]
        layout = prepared.metadata["layout"]
        verifier = f"{layout['workdir']}/.harbor/logs/verifier"
        await env.write_text(f"{verifier}/reward.txt", "1\n")
        await env.write_text(f"{verifier}/reward.json", json.dumps({"reward": 1}))
        await env.write_text(f"{layout['workdir']}/.harbor/tests/test.sh", "#!/bin/sh\necho 1 > $0.txt\n")
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED)

    run = await run_benchmark("harbor", cheat, benchmark_args={"path": str(tasks)}, task_ids=["hello"],
                              run_dir=tmp_path / "run")
    result = run.result("hello")
    assert result.status is TaskStatus.COMPLETED
    assert result.metrics == {"reward": 0.0}
    assert result.artifacts["verifier"]["reward_file"] == "reward.txt"


async def test_the_agent_never_sees_tests_or_solution(tasks: Path, tmp_path: Path) -> None:
    seen: dict[str, object] = {}

    async def look(task, prepared, req, plan, env):  # type: ignore[no-untyped-def]
        found = await env.exec(["sh", "-c", "find . -type f | sort; grep -rl 'checking /app/hello.txt' . || true"])
        seen["files"] = found.stdout
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED)

    run = await run_benchmark("harbor", look, benchmark_args={"path": str(tasks)}, task_ids=["hello"],
                              run_dir=tmp_path / "run")
    assert run.result("hello").status is TaskStatus.COMPLETED
    assert "test.sh" not in str(seen["files"]) and "solve.sh" not in str(seen["files"])
    assert "checking" not in str(seen["files"])
    spec = next(iter(HarborBenchmark(path=str(tasks)).load_tasks(run.request)))
    assert "checking /app/hello.txt" not in json.dumps(spec.data) + json.dumps(spec.metadata)


async def test_the_instruction_maps_paths_into_the_local_working_directory(tasks: Path, tmp_path: Path) -> None:
    got: dict[str, str] = {}

    async def act(task, prepared, req, plan, env):  # type: ignore[no-untyped-def]
        bench = HarborBenchmark(path=str(tasks))
        got["text"] = bench.instruction(task, prepared)
        got["workdir"] = env.workdir
        await env.write_text("hello.txt", "hello\n")
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED)

    run = await run_benchmark("harbor", act, benchmark_args={"path": str(tasks)}, task_ids=["hello"],
                              run_dir=tmp_path / "run")
    assert got["text"] == f"Create the file {got['workdir']}/hello.txt holding the single line `hello`.\n"
    assert run.result("hello").metrics == {"reward": 1.0}


@pytest.mark.parametrize("how", ["task", "option"])
async def test_fresh_verification_sees_only_the_declared_outputs(tmp_path: Path, how: str) -> None:
    root = separate_task(tmp_path / "tasks")
    args = {"path": str(root)}
    if how == "option":  # the same task declared shared, verified fresh by the option
        toml = root / "separate" / "task.toml"
        toml.write_text(toml.read_text().replace('environment_mode = "separate"', 'environment_mode = "shared"'))
        args["verify"] = "fresh"
    bench = HarborBenchmark(**args)
    assert bench.evaluation_environment_mode == "fresh" and not bench.evaluate_needs_live_environment
    run = await run_benchmark("harbor", "oracle", benchmark_args=args, run_dir=tmp_path / "run")
    result = run.result("separate")
    assert result.status is TaskStatus.COMPLETED, result.error
    assert result.metrics == {"reward": 1.0}  # /app/scratch.txt stayed behind with the agent
    assert result.artifacts["verifier"]["environment"] == "fresh"
    assert "app/out.txt" in result.artifacts["outputs"]
    shared = await run_benchmark("harbor", "oracle", benchmark_args={**args, "verify": "shared"},
                                 run_dir=tmp_path / "shared")
    assert shared.result("separate").metrics == {"reward": 0.0}  # the verifier sees the scratch file


async def test_mixed_verification_modes_are_refused(tasks: Path, tmp_path: Path) -> None:
    root = suite(tmp_path / "mixed")
    separate_task(root)
    with pytest.raises(UsageError, match=r"verify=shared\|fresh"):
        HarborBenchmark(path=str(root))
    assert HarborBenchmark(path=str(root), verify="fresh").evaluation_environment_mode == "fresh"


async def test_conformance(tasks: Path) -> None:
    await check_benchmark(HarborBenchmark(path=str(tasks)))


async def test_a_single_task_directory(tasks: Path, tmp_path: Path) -> None:
    run = await run_benchmark("harbor", "oracle", benchmark_args={"path": str(tasks / "hello")},
                              run_dir=tmp_path / "run")
    assert [r.task_id for r in run.results] == ["hello"] and run.result("hello").metrics == {"reward": 1.0}


async def test_env_templates_take_host_variables_only_when_allowed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARBOR_TEST_SECRET", "s3cret")
    write_task(tmp_path / "t", "env", instruction="x", toml="""
        [environment]
        env = { FROM_HOST = "${HARBOR_TEST_SECRET}", WITH_DEFAULT = "${HARBOR_UNSET_VAR:-fallback}" }
        [verifier]
        env = { CHECK = "${HARBOR_TEST_SECRET}" }
    """, test='[ "$FROM_HOST" = s3cret ] && [ "$WITH_DEFAULT" = fallback ] && [ "$CHECK" = s3cret ]\n'
              'echo $? > /logs/verifier/reward.txt\n')
    with pytest.raises(UsageError, match="pass_env=HARBOR_TEST_SECRET"):
        HarborBenchmark(path=str(tmp_path / "t"))
    run = await run_benchmark("harbor", "nop", benchmark_args={"path": str(tmp_path / "t"),
                                                               "pass_env": "HARBOR_TEST_SECRET"},
                              run_dir=tmp_path / "run")
    assert run.result("env").metrics == {"reward": 0.0}  # exit status 0 of the checks: all three were set
    assert "s3cret" not in (run.run_dir / "results.jsonl").read_text()


async def test_a_task_without_a_solution_cannot_run_under_oracle(tmp_path: Path) -> None:
    write_task(tmp_path / "t", "unsolved", instruction="x", test="echo 1 > /logs/verifier/reward.txt\n")
    run = await run_benchmark("harbor", "oracle", benchmark_args={"path": str(tmp_path / "t")},
                              run_dir=tmp_path / "run")
    result = run.result("unsolved")
    assert result.status is TaskStatus.RUN_ERROR and "no solution/solve.sh" in result.error


async def test_nested_task_directories_and_rescoring_a_fresh_run(tmp_path: Path) -> None:
    import subprocess
    import sys

    separate_task(tmp_path / "tasks" / "org")
    run = await run_benchmark("harbor", "oracle", benchmark_args={"path": str(tmp_path / "tasks")},
                              run_dir=tmp_path / "run")
    assert run.result("org/separate").metrics == {"reward": 1.0}
    rescored = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "agentcompass.cli.main", "evaluate", str(run.run_dir), "-o",
                         str(tmp_path / "rescored"), "--json"], capture_output=True, text=True, timeout=120)
    assert rescored.returncode == 0, rescored.stderr
    summary = json.loads(rescored.stdout)
    assert summary["metrics"]["overall"]["reward"]["mean"] == 1.0


def test_tasks_that_need_their_image_are_refused_on_local_before_any_work(tmp_path: Path) -> None:
    """Before: the Dockerfile was ignored on `local`, the task ran without what it puts into the image and
    scored 0 (exit 0). Now: one usage line naming the tasks and `--env docker`, nothing written."""
    from agentcompass.exit_codes import ExitCode

    from tests.harbor.taskdirs import DOCKERFILE
    from tests.helpers.cli_processes import run_cli_subprocess

    root = tmp_path / "tasks"
    test = "test -f /app/data.txt\n"
    write_task(root, "plain", instruction="Nothing.", test="echo 1 > /logs/verifier/reward.txt\n", solve="true\n")
    write_task(root, "baked", instruction="Read /app/data.txt.", test=test,
               dockerfile=DOCKERFILE + "RUN echo 42 > /app/data.txt\n")
    write_task(root, "copied", instruction="Read /app/data.txt.", test=test,
               dockerfile=DOCKERFILE + "COPY data.txt /app/data.txt\n", files={"environment/data.txt": "42\n"})
    out = tmp_path / "run"
    done = run_cli_subprocess("run", "harbor", "oracle", "mock", "-b", f"path={root}", "-o", str(out),
                              testing=False)
    assert done.returncode == ExitCode.USAGE, done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert "2 task(s) need their image, which --env local cannot build" in line
    assert "baked (environment/Dockerfile runs RUN)" in line and "copied (environment/Dockerfile runs COPY)" in line
    assert "plain" not in line and "--env docker" in line
    assert not out.exists()
    # the task that needs no image still runs on its own
    done = run_cli_subprocess("run", "harbor", "oracle", "mock", "-b", f"path={root}", "-t", "plain",
                              "-o", str(out), testing=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("dockerfile", "fills"), [
    ("FROM python:3.11-slim\nWORKDIR /app\nENV A=1\n", []),
    ("FROM python:3.11-slim\n# RUN nothing\nRUN apt-get update && \\\n    RUN-like-word\nADD x /x\n", ["RUN", "ADD"]),
    ("from python:3.11-slim\nrun true\ncopy a b\n", ["RUN", "COPY"]),
])
def test_which_dockerfiles_fill_their_image(tmp_path: Path, dockerfile: str, fills: list[str]) -> None:
    from agentcompass_harbor.config import dockerfile_fills_image

    path = tmp_path / "Dockerfile"
    path.write_text(dockerfile)
    assert dockerfile_fills_image(path) == fills
