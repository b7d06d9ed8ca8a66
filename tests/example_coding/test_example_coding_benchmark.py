"""The example_coding benchmark: single phases over real sessions and whole attempts through the real
lifecycle (both from the kit, see conftest.py), and the kit's conformance checks."""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.plugins import load_plugins
from agentcompass.runtime import BaseBenchmark, ExecutionPlan, PreparedTask, RunResult, TaskStatus
from agentcompass.testing import check_benchmark, check_collect_does_not_score, check_evaluate_keeps_error
from agentcompass_example_coding import tasks as task_data
from agentcompass_example_coding.benchmark import ExampleCodingBenchmark
from ec_support import REQUEST, TASK_IDS, completed, does_nothing, oracle, task, writes

# -- registration, options, tasks ------------------------------------------------------------------------


def test_plugin_registers_the_benchmark_class() -> None:
    host = load_plugins(only="example_coding")
    assert host.records["example_coding"].error is None
    assert host.factory("benchmark", "example_coding") is ExampleCodingBenchmark
    assert issubclass(ExampleCodingBenchmark, BaseBenchmark)
    assert ExampleCodingBenchmark.has_reference_solutions()


def test_class_attributes() -> None:
    assert ExampleCodingBenchmark.name == "example_coding"
    assert ExampleCodingBenchmark.evaluation_environment_mode == "fresh"
    contract = ExampleCodingBenchmark.metric_contract
    assert contract.primary == "score"
    assert contract.scalar == ("score", "tests_passed_fraction")
    assert set(contract.labels) == {"score", "tests_passed_fraction"}


def test_unknown_option_is_a_usage_error_naming_the_valid_ones() -> None:
    with pytest.raises(UsageError, match="'colour'") as info:
        ExampleCodingBenchmark(colour="red")
    assert "categories" in str(info.value) and "test_timeout" in str(info.value)


@pytest.mark.parametrize(
    "options",
    [
        {"test_timeout": "soon"},
        {"test_timeout": "0"},
        {"test_timeout": "-1"},
        {"categories": "poetry"},
        {"categories": ","},
    ],
)
def test_bad_option_values_are_usage_errors(options: dict[str, str]) -> None:
    with pytest.raises(UsageError):
        ExampleCodingBenchmark(**options)


def test_options_as_strings_from_the_command_line() -> None:
    bench = ExampleCodingBenchmark(categories="strings, lists", test_timeout="2.5")
    assert bench.test_timeout == 2.5
    specs = list(bench.load_tasks(REQUEST))
    assert specs and {s.category for s in specs} == {"strings", "lists"}


def test_load_tasks() -> None:
    specs = list(ExampleCodingBenchmark().load_tasks(REQUEST))
    assert len(specs) >= 6
    assert len({s.task_id for s in specs}) == len(specs)
    assert {s.category for s in specs} == {"math", "strings", "lists"}
    for spec in specs:
        prompt = spec.data["prompt"]
        assert "solution.py" in prompt and spec.data["entry_point"] in prompt
        # Nothing secret reaches the harness through the spec.
        source = task_data.by_id(spec.task_id)
        assert source.reference_solution.strip() not in str(spec)
        assert "def test_" not in str(spec)


def test_every_task_has_a_reference_and_hidden_tests() -> None:
    for coding_task in task_data.load_all():
        namespace: dict = {}
        exec(compile(coding_task.reference_solution, f"{coding_task.task_id}.py", "exec"), namespace)
        assert callable(namespace[coding_task.entry_point])
        assert "def test_" in coding_task.hidden_tests


# -- prepare and collect ----------------------------------------------------------------------------------


async def test_prepare_task_writes_the_prompt_and_is_idempotent(open_env) -> None:
    bench = ExampleCodingBenchmark()
    spec = task("fizzbuzz", bench)
    plan = ExecutionPlan(run_id="r", task_id=spec.task_id)
    env = await open_env()
    first = await bench.prepare_task(spec, REQUEST, plan, env)
    await env.write_text("solution.py", "# the agent's work\n")
    second = await bench.prepare_task(spec, REQUEST, plan, env)
    assert first == second
    assert await env.read_text("PROMPT.md") == spec.data["prompt"]
    assert await env.read_text("solution.py") == "# the agent's work\n"  # a retry leaves the work alone
    # relative paths land in the working directory
    assert (await env.exec(["test", "-f", f"{env.workdir}/PROMPT.md"])).returncode == 0


async def test_collect_artifacts_downloads_the_submission(open_env, tmp_path: Path) -> None:
    bench = ExampleCodingBenchmark()
    spec = task("roman", bench)
    plan = ExecutionPlan(run_id="r", task_id=spec.task_id, artifacts_dir=str(tmp_path / "a"))
    env = await open_env()
    prepared = await bench.prepare_task(spec, REQUEST, plan, env)
    before = await bench.apply_reference_solution(spec, prepared, REQUEST, plan, env)
    assert before.status is TaskStatus.COMPLETED and before.task_id == "roman" and before.category == "math"
    before = replace(before, artifacts={"agent": "kept"})
    after = await bench.collect_artifacts(spec, prepared, before, REQUEST, plan, env)
    saved = (tmp_path / "a" / "solution.py").read_text()
    assert saved == task_data.by_id("roman").reference_solution
    assert after.artifacts["agent"] == "kept"
    assert after.artifacts["submitted"] is True and after.artifacts["files"] == ["solution.py"]
    assert after.artifacts["solution_sha256"] == hashlib.sha256(saved.encode()).hexdigest()
    assert after.metrics == {} and after.status is TaskStatus.COMPLETED


async def test_collect_artifacts_without_a_submission(open_env, tmp_path: Path) -> None:
    bench = ExampleCodingBenchmark()
    spec = task("roman", bench)
    plan = ExecutionPlan(run_id="r", task_id=spec.task_id, artifacts_dir=str(tmp_path / "a"))
    env = await open_env()
    prepared = await bench.prepare_task(spec, REQUEST, plan, env)
    after = await bench.collect_artifacts(spec, prepared, completed(spec), REQUEST, plan, env)
    assert after.status is TaskStatus.COMPLETED and after.error is None
    assert after.artifacts == {"submitted": False, "files": []}
    assert not (tmp_path / "a" / "solution.py").exists()


@pytest.mark.parametrize("task_id", TASK_IDS)
async def test_conformance(task_id: str) -> None:
    bench = ExampleCodingBenchmark()
    await check_benchmark(bench, task(task_id, bench))
    await check_evaluate_keeps_error(bench, task(task_id, bench),
                                     statuses=[s for s in TaskStatus if s is not TaskStatus.COMPLETED])


async def test_collect_does_not_score_a_real_submission(open_env) -> None:
    bench = ExampleCodingBenchmark()
    spec = task("roman", bench)
    env = await open_env()
    await env.write_text("solution.py", task_data.by_id("roman").reference_solution)
    await check_collect_does_not_score(bench, spec, env=env, result=completed(spec))


# -- evaluate ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", TASK_IDS)
async def test_reference_solution_passes_its_hidden_tests(attempt, task_id: str) -> None:
    bench = ExampleCodingBenchmark()
    result = await attempt(bench, task(task_id, bench), oracle(bench))
    assert result.status is TaskStatus.COMPLETED, result.error
    assert result.metrics == {"score": 1.0, "tests_passed_fraction": 1.0}
    assert result.artifacts["evaluation"]["failures"] == {}


async def test_no_submission_scores_zero(attempt) -> None:
    bench = ExampleCodingBenchmark()
    result = await attempt(bench, task("word_count", bench), does_nothing)
    assert result.status is TaskStatus.COMPLETED and result.error is None
    assert result.metrics == {"score": 0.0, "tests_passed_fraction": 0.0}
    assert result.artifacts["submitted"] is False
    assert result.artifacts["evaluation"]["submitted"] is False


WRONG_FIZZBUZZ = """
def fizzbuzz(n):  # forgets FizzBuzz: passes 3 of the 5 hidden tests
    return ["Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i) for i in range(1, n + 1)]
"""


async def test_wrong_solution_scores_partial_fraction(attempt) -> None:
    bench = ExampleCodingBenchmark()
    result = await attempt(bench, task("fizzbuzz", bench), writes(WRONG_FIZZBUZZ))
    assert result.status is TaskStatus.COMPLETED
    assert result.metrics == {"score": 0.0, "tests_passed_fraction": pytest.approx(3 / 5)}
    failures = result.artifacts["evaluation"]["failures"]
    assert set(failures) == {"test_first_fifteen", "test_large"}
    assert all("AssertionError" in e for e in failures.values())


@pytest.mark.parametrize("task_id", TASK_IDS)
async def test_hidden_tests_reject_a_stub(attempt, task_id: str) -> None:
    bench = ExampleCodingBenchmark()
    entry = task_data.by_id(task_id).entry_point
    result = await attempt(bench, task(task_id, bench), writes(f"def {entry}(*args, **kwargs):\n    return None\n"))
    assert result.status is TaskStatus.COMPLETED
    assert result.metrics["score"] == 0.0
    assert result.metrics["tests_passed_fraction"] < 0.5


@pytest.mark.parametrize(
    ("label", "source"),
    [
        ("loop in the function", "def roman(n):\n    while True:\n        pass\n"),
        ("loop at import", "while True:\n    pass\n"),
        ("sleeping child process", "import subprocess\nsubprocess.run(['sleep', '600'])\n"),
    ],
)
async def test_looping_submission_scores_zero_without_hanging(attempt, label: str, source: str) -> None:
    bench = ExampleCodingBenchmark(test_timeout="0.5")
    started = time.monotonic()
    result = await attempt(bench, task("roman", bench), writes(source))
    assert time.monotonic() - started < 30, label
    assert result.status is TaskStatus.COMPLETED
    assert result.metrics == {"score": 0.0, "tests_passed_fraction": 0.0}
    assert all("timed out" in e for e in result.artifacts["evaluation"]["failures"].values())


@pytest.mark.parametrize(
    "source",
    [
        "def roman(n) return 'I'\n",  # syntax error
        "import no_such_module_anywhere\n",
        "raise SystemExit(0)\n",
        "import os\nos._exit(0)\n",  # exits 'successfully' before any test ran: must not pass
        'import sys\nprint(\'{"passed": 5, "total": 5}\')\nsys.stdout.flush()\n',  # tries to fake a report
        "x = 'a' * (1 << 33)\n",  # memory hog
    ],
)
async def test_broken_submission_scores_zero(attempt, source: str) -> None:
    bench = ExampleCodingBenchmark(test_timeout="5")
    result = await attempt(bench, task("roman", bench), writes(source))
    assert result.status is TaskStatus.COMPLETED
    assert result.metrics == {"score": 0.0, "tests_passed_fraction": 0.0}


CHEATING_ROMAN = """
import os

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(root, "run_tests.py"), "w") as f:
    f.write("import sys\\nprint(sys.stdin.readline().strip())\\n")
with open(os.path.join(root, "hidden_tests.py"), "w") as f:
    f.write("def test_anything(solution):\\n    pass\\n")


def roman(n):
    return "I"
"""


async def test_rewriting_the_verifier_on_disk_does_not_help(attempt) -> None:
    bench = ExampleCodingBenchmark()
    result = await attempt(bench, task("roman", bench), writes(CHEATING_ROMAN))
    assert result.metrics == {"score": 0.0, "tests_passed_fraction": 0.0}


async def test_one_looping_test_costs_only_that_test(attempt) -> None:
    source = task_data.by_id("roman").reference_solution + (
        "\n_real = roman\n\ndef roman(n):\n    while n == 3999:\n        pass\n    return _real(n)\n"
    )
    bench = ExampleCodingBenchmark(test_timeout="1")
    result = await attempt(bench, task("roman", bench), writes(source))
    assert result.metrics["score"] == 0.0
    assert result.metrics["tests_passed_fraction"] == pytest.approx(3 / 5)


@pytest.mark.parametrize(
    "status", [TaskStatus.RUN_ERROR, TaskStatus.PREPARE_ERROR, TaskStatus.EVAL_ERROR, TaskStatus.CANCELLED]
)
async def test_evaluate_keeps_a_failed_result_untouched(status: TaskStatus) -> None:
    bench = ExampleCodingBenchmark()
    spec = task("flatten", bench)
    failed = RunResult(
        task_id=spec.task_id,
        category=spec.category,
        status=status,
        error="boom",
        artifacts={"x": 1},
        metrics={"score": 1.0},
    )
    plan = ExecutionPlan(run_id="r", task_id=spec.task_id)
    evaluated = await bench.evaluate(spec, PreparedTask(spec.task_id), failed, REQUEST, plan, None)
    assert evaluated == replace(failed, metrics={})


async def test_evaluate_needs_an_environment() -> None:
    bench = ExampleCodingBenchmark()
    spec = task("flatten", bench)
    plan = ExecutionPlan(run_id="r", task_id=spec.task_id)
    with pytest.raises(RuntimeError, match="environment"):
        await bench.evaluate(spec, PreparedTask(spec.task_id), completed(spec), REQUEST, plan, None)


@pytest.mark.parametrize(
    ("what", "verifier", "hidden_tests"),
    [
        ("verifier crashes", "raise RuntimeError('verifier bug')\n", None),
        ("verifier prints garbage", "print('not json')\n", None),
        ("verifier prints nothing", "pass\n", None),
        ("verifier report is incomplete", "print('{\"passed\": 1}')\n", None),
        ("verifier hangs", "import time\ntime.sleep(600)\n", None),
        ("hidden tests do not compile", None, "def test_x(solution)\n"),
        ("hidden tests define no test", None, "X = 1\n"),
    ],
)
async def test_a_verifier_failure_raises(
    open_env, monkeypatch: pytest.MonkeyPatch, what: str, verifier: str | None, hidden_tests: str | None
) -> None:
    """A broken verifier must raise (the runtime records EVAL_ERROR), never score the submission 0."""
    bench = ExampleCodingBenchmark()
    spec = task("fizzbuzz", bench)
    if verifier is not None:
        monkeypatch.setattr(task_data, "verifier_source", lambda: verifier)
    if hidden_tests is not None:
        monkeypatch.setattr(task_data.CodingTask, "hidden_tests", property(lambda self: hidden_tests))
    overall_timeout = 2.0 if what == "verifier hangs" else 120.0
    monkeypatch.setattr(ExampleCodingBenchmark, "_verifier_timeout", lambda self, source: overall_timeout)
    env = await open_env()
    await env.write_text("artifacts/solution.py", task_data.by_id("fizzbuzz").reference_solution)
    plan = ExecutionPlan(run_id="r", task_id=spec.task_id)
    with pytest.raises(RuntimeError, match="verifier"):
        await bench.evaluate(spec, PreparedTask(spec.task_id), completed(spec), REQUEST, plan, env)
