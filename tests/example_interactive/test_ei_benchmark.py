"""The benchmark through the real lifecycle (the kit's ``run_benchmark``: the runner, the model gateway, the
``local`` environment), single phases over a real local session, the kit's conformance checks, and the
plugin's registration."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.plugins import load_plugins
from agentcompass.runtime import (
    ExecutionPlan,
    HarnessFreeBenchmark,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskStatus,
)
from agentcompass.testing import (
    RecordingProvider,
    ScriptedModel,
    check_benchmark,
    check_evaluate_keeps_error,
    check_prepare_idempotent,
    local_session,
    make_provider,
    run_benchmark,
)
from ei_support import EXPECTED_MOCK_SCORES, MockPolicy, scripted, text, tool_call
from example_interactive import RUNNER_FILES
from example_interactive.benchmark import ExampleInteractiveBenchmark

REQ = RunRequest(benchmark="example_interactive", harness="none", model="mock")


def list_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def plan_for(task_id: str) -> ExecutionPlan:
    return ExecutionPlan(run_id="run-test", task_id=task_id)


def tasks_by_id(bench=None):
    return {t.task_id: t for t in (bench or ExampleInteractiveBenchmark()).load_tasks(REQ)}


def test_class_contract():
    bench = ExampleInteractiveBenchmark()
    assert isinstance(bench, HarnessFreeBenchmark)
    assert bench.name == "example_interactive"
    assert bench.evaluation_environment_mode == "reuse"
    assert bench.metric_contract.primary == "score"
    assert bench.metric_contract.scalar == ("score",)
    assert bench.metric_contract.label("score") == "Reward"
    assert bench.has_reference_solutions()


def test_load_tasks():
    tasks = list(ExampleInteractiveBenchmark().load_tasks(REQ))
    assert [t.task_id for t in tasks] == list(EXPECTED_MOCK_SCORES)
    for t in tasks:
        assert t.category in {"create", "update", "policy", "multi-step"}
        assert {"initial_db", "user", "golden_actions"} <= set(t.data)
        assert "db_patch" not in t.data and t.metadata["description"]


def test_options():
    bench = ExampleInteractiveBenchmark(max_turns="7", timeout="12.5", category="policy, create")
    assert (bench.max_turns, bench.timeout) == (7, 12.5)
    assert {t.category for t in bench.load_tasks(REQ)} == {"policy", "create"}


def test_unknown_option_names_it_and_the_valid_ones():
    with pytest.raises(UsageError) as info:
        ExampleInteractiveBenchmark(max_turn="3")
    message = str(info.value)
    assert "max_turn" in message and "max_turns" in message and "timeout" in message and "category" in message


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"max_turns": "0"}, "max_turns"),
        ({"max_turns": "x"}, "max_turns"),
        ({"timeout": "-1"}, "timeout"),
        ({"timeout": "soon"}, "timeout"),
        ({"category": ""}, "category"),
    ],
)
def test_bad_option_values(options, fragment):
    with pytest.raises(UsageError, match=fragment):
        ExampleInteractiveBenchmark(**options)


def test_unknown_category():
    with pytest.raises(UsageError, match=r"unknown category .nope.*multi-step"):
        list(ExampleInteractiveBenchmark(category="nope").load_tasks(REQ))


async def test_prepare_task_writes_relative_files_and_is_idempotent():
    bench = ExampleInteractiveBenchmark(max_turns="5")
    task = tasks_by_id(bench)["create_basic"]
    async with local_session() as env:
        root = Path(env.workdir)
        prepared = await bench.prepare_task(task, REQ, plan_for(task.task_id), env)
        runner = prepared.metadata["official_runner"]
        assert runner == {
            "package_dir": "example_interactive",
            "request_path": "example_interactive_run/request.json",
            "result_path": "example_interactive_run/result.json",
            "timeout_seconds": 600.0,
        }
        files = list_files(root)
        assert files == sorted([*(f"example_interactive/{n}" for n in RUNNER_FILES), runner["request_path"]])
        assert not any(f.endswith(("benchmark.py", "plugin.py")) for f in files)
        request = json.loads((root / runner["request_path"]).read_text())
        assert request["task_id"] == "create_basic" and request["max_turns"] == 5
        assert request["task"]["initial_db"] == json.loads(json.dumps(task.data["initial_db"]))
        assert "api_key" not in json.dumps(request).lower()
        snapshot = {f: (root / f).read_bytes() for f in files}
        again = await bench.prepare_task(task, REQ, plan_for(task.task_id), env)
        assert again == prepared
        assert {f: (root / f).read_bytes() for f in files} == snapshot
    await check_prepare_idempotent(bench, task)  # the kit's check, in a fresh session


@pytest.mark.parametrize("task_id", ["create_basic", "policy_delete_request", "multi_create_then_complete"])
async def test_conformance(task_id: str):
    bench = ExampleInteractiveBenchmark()
    await check_benchmark(bench, tasks_by_id(bench)[task_id])
    await check_evaluate_keeps_error(bench, statuses=[s for s in TaskStatus if s is not TaskStatus.COMPLETED])


async def test_mock_like_agent_gives_a_mix_of_rewards(tmp_path: Path):
    spy = RecordingProvider(make_provider("local"))
    run = await run_benchmark(ExampleInteractiveBenchmark, model=ScriptedModel(MockPolicy()), environment=spy,
                              concurrency=1, run_dir=tmp_path / "run")
    assert run.exit_code == 0, run.summary
    for result in run.results:
        assert result.status is TaskStatus.COMPLETED, result.error
        assert result.artifacts["evaluation"]["db_match"] is (result.metrics["score"] == 1.0)
    assert run.metric("score") == EXPECTED_MOCK_SCORES
    for task_id in EXPECTED_MOCK_SCORES:
        assert spy.execs_of(task_id)[0].argv[:4] == ["python3", "-m", "example_interactive.runner", "run"]


async def test_reference_solution_scores_one_everywhere(tmp_path: Path):
    run = await run_benchmark(ExampleInteractiveBenchmark, "oracle", run_dir=tmp_path / "run")
    for result in run.results:
        assert result.status is TaskStatus.COMPLETED, result.error
        assert result.metrics == {"score": 1.0}, result.task_id
    assert sorted(run.by_id) == sorted(EXPECTED_MOCK_SCORES) and run.exit_code == 0


async def test_a_wrong_db_scores_zero_with_a_diff(tmp_path: Path):
    agent = scripted(tool_call("create_task", user_id="user_1", title="Prepare Slides"), text("ok"))
    run = await run_benchmark(ExampleInteractiveBenchmark, model=agent, task_ids=["create_basic"],
                              run_dir=tmp_path / "run")
    result = run.result("create_basic")
    assert result.status is TaskStatus.COMPLETED and result.metrics == {"score": 0.0}
    assert result.final_answer == "Is there anything else?"
    assert any("task_7" in line for line in result.artifacts["evaluation"]["db_diff"])
    assert result.artifacts["official_result"]["termination"] == "user_stop"


async def test_gateway_failure_is_a_run_error_kept_through_evaluation(tmp_path: Path):
    run = await run_benchmark(ExampleInteractiveBenchmark, model=lambda body: (401, {"error": {"message": "bad token"}}),
                              task_ids=["create_basic"], run_dir=tmp_path / "run")
    result = run.result("create_basic")
    assert result.status is TaskStatus.RUN_ERROR and run.exit_code == 1
    assert "HTTP 401" in result.error and "bad token" in result.error
    assert result.metrics == {} and result.category == "create"


async def test_runner_timeout_is_a_run_error(tmp_path: Path):
    async def slow(body):
        await asyncio.sleep(3)
        return text("late")

    run = await run_benchmark(ExampleInteractiveBenchmark, model=slow, benchmark_args={"timeout": "1"},
                              task_ids=["create_basic"], run_dir=tmp_path / "run")
    result = run.result("create_basic")
    assert result.status is TaskStatus.RUN_ERROR and "timed out" in result.error
    assert result.timings["run"] < 3


async def test_evaluate_needs_the_environment_for_completed_results():
    bench = ExampleInteractiveBenchmark()
    task = tasks_by_id(bench)["create_basic"]
    prepared = PreparedTask(task_id=task.task_id)
    ok = RunResult(
        task_id=task.task_id,
        category=task.category,
        status=TaskStatus.COMPLETED,
        artifacts={"official_result": {"final_db": task.data["initial_db"]}},
    )
    with pytest.raises(RuntimeError, match="Environment"):
        await bench.evaluate(task, prepared, ok, REQ, plan_for(task.task_id), None)
    failed = RunResult(task_id=task.task_id, status=TaskStatus.RUN_ERROR, error="boom", metrics={"score": 1.0})
    kept = await bench.evaluate(task, prepared, failed, REQ, plan_for(task.task_id), None)
    assert kept.status is TaskStatus.RUN_ERROR and kept.error == "boom" and kept.metrics == {}


async def test_run_task_needs_an_environment():
    bench = ExampleInteractiveBenchmark()
    task = tasks_by_id(bench)["create_basic"]
    with pytest.raises(RuntimeError, match="EnvironmentSession"):
        await bench.run_task(task, PreparedTask(task_id=task.task_id), REQ, plan_for(task.task_id), None)


async def test_tasks_run_concurrently_in_separate_environments(tmp_path: Path):
    spy = RecordingProvider(make_provider("local"))
    run = await run_benchmark(ExampleInteractiveBenchmark, model=ScriptedModel(MockPolicy()), environment=spy,
                              concurrency=len(EXPECTED_MOCK_SCORES), run_dir=tmp_path / "run")
    assert run.metric() == EXPECTED_MOCK_SCORES
    workdirs = [workdir for _, workdir in spy.opened]
    assert len(set(workdirs)) == len(workdirs) == len(EXPECTED_MOCK_SCORES)
    assert sorted(spy.closed) == sorted(EXPECTED_MOCK_SCORES)


# -- the plugin ----------------------------------------------------------------------------------


def test_entry_point_and_registration():
    eps = [ep for ep in importlib.metadata.entry_points(group="agentcompass") if ep.name == "example_interactive"]
    assert [ep.value for ep in eps] == ["example_interactive.plugin"]
    host = load_plugins(eps, only="example_interactive")
    record = host.records["example_interactive"]
    assert record.loaded and record.error is None, record.error
    assert record.registers == {"benchmark": ["example_interactive"]}
    assert host.factory("benchmark", "example_interactive") is ExampleInteractiveBenchmark


def test_plugin_import_is_cheap():
    import subprocess
    import sys

    code = (
        "import sys, example_interactive.plugin; "
        "print(','.join(m for m in ('aiohttp', 'httpx', 'docker', 'python_on_whales', 'hypothesis') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
