"""The ``taubench`` benchmark as the runtime drives it: options, data checks, the roles a run needs, the
kit's conformance checks, and runs through the real lifecycle on the local environment."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tb_support as s
from agentcompass.errors import UsageError
from agentcompass.runtime import RunRequest, TaskStatus
from agentcompass.testing import ScriptedModel, check_benchmark, default_request, run_benchmark
from agentcompass_taubench.benchmark import TauBenchBenchmark


def request(harness: str = "none", **fields) -> RunRequest:  # type: ignore[no-untyped-def]
    return RunRequest(benchmark="taubench", harness=harness, model="mock").with_options(**fields)


def task_ids(bench: TauBenchBenchmark, req: RunRequest | None = None) -> list[str]:
    return [t.task_id for t in bench.load_tasks(req or request("oracle"))]


# -- options ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "message"), [
    ({"domian": "retail"}, "unknown option(s) for benchmark 'taubench': domian; valid options: domain, split"),
    ({"domain": "banking"}, "unknown domain(s) 'banking'; domains: mock, airline, retail, telecom"),
    ({"task_set": "../tasks.json"}, "'task_set' must be a file name in the domain directory"),
    ({"domain": " , "}, "names no domain"),
    ({"split": "dev"}, "'split' must be one of base, train, test"),
    ({"max_steps": "0"}, "'max_steps' must be a positive integer"),
    ({"max_errors": "x"}, "'max_errors' must be a positive integer"),
    ({"nl_assertions": "skip"}, "'nl_assertions' must be one of judge, exclude"),
    ({"user_temperature": "-1"}, "'user_temperature' must be a number of 0 or more"),
    ({"timeout": "0"}, "'timeout' must be a positive number"),
    ({"enforce_communication_protocol": "maybe"}, "must be true or false"),
    ({"data_dir": "/no/such/dir"}, "taubench data_dir '/no/such/dir' is not a directory"),
])
def test_bad_options_are_one_line_usage_errors(options: dict, message: str):
    with pytest.raises(UsageError) as raised:
        TauBenchBenchmark(**options)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_domains_splits_and_task_ids():
    assert len(task_ids(TauBenchBenchmark())) == 10  # mock by default
    ids = task_ids(TauBenchBenchmark(domain="airline,retail"))
    assert len(ids) == 164 and ids[0] == "airline/0" and ids[-1].startswith("retail/")
    assert len(task_ids(TauBenchBenchmark(domain="retail", split="train"))) == 74
    assert len(task_ids(TauBenchBenchmark(domain="retail", split="test"))) == 40
    spec = next(iter(TauBenchBenchmark(domain="airline").load_tasks(request("oracle"))))
    assert spec.category == "airline" and spec.data["domain"] == "airline" and spec.data["task"]["id"] == "0"
    assert spec.metadata["upstream_id"] == "0"
    with pytest.raises(UsageError, match=r"domain 'mock' has no split 'train' in .*split_tasks.json; splits: base"):
        task_ids(TauBenchBenchmark(split="train"))


# -- the data directory ---------------------------------------------------------------------------------------


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    root = tmp_path / "tau2"
    shutil.copytree(s.ROOT, root, ignore=shutil.ignore_patterns("airline", "retail"))
    return root


def test_another_data_dir_of_the_same_layout(data_copy: Path, tmp_path: Path):
    assert len(task_ids(TauBenchBenchmark(data_dir=str(data_copy)))) == 10
    checkout = tmp_path / "checkout"
    (checkout / "data").mkdir(parents=True)
    shutil.copytree(data_copy, checkout / "data" / "tau2")
    assert len(task_ids(TauBenchBenchmark(data_dir=str(checkout)))) == 10
    with pytest.raises(UsageError, match="has no domains/ directory"):
        TauBenchBenchmark(data_dir=str(tmp_path))


@pytest.mark.parametrize(("breakage", "named"), [
    (lambda root: (root / "domains/mock/policy.md").unlink(), "domains/mock/policy.md is missing"),
    (lambda root: (root / "domains/mock/user_db.json").unlink(), "domains/mock/user_db.json is missing"),
    (lambda root: (root / "user_simulator/simulation_guidelines.md").unlink(), "simulation_guidelines.md is missing"),
    (lambda root: (root / "domains/mock/tasks.json").write_text("[{"), "domains/mock/tasks.json is not valid JSON"),
    (lambda root: (root / "domains/mock/tasks.json").write_text('[{"id": "x"}]'),
     "domains/mock/tasks.json: task 'x': 'user_scenario' must be an object"),
    (lambda root: (root / "domains/mock/split_tasks.json").write_text('{"base": ["nope"]}'),
     "split 'base' names task id(s) not in"),
    (lambda root: (root / "domains/mock/split_tasks.json").write_text('{"base": "all"}'),
     "split_tasks.json must map split names to lists of task ids"),
])
def test_a_malformed_data_dir_names_the_file(data_copy: Path, breakage, named: str):  # type: ignore[no-untyped-def]
    breakage(data_copy)
    with pytest.raises(UsageError) as raised:
        task_ids(TauBenchBenchmark(data_dir=str(data_copy)))
    assert named in str(raised.value) and "\n" not in str(raised.value)


def test_a_database_that_does_not_match_the_data_model_is_a_usage_error_before_the_run(data_copy: Path):
    db = json.loads((data_copy / "domains/mock/db.json").read_text())
    db["tasks"]["task_1"]["status"] = "archived"
    (data_copy / "domains/mock/db.json").write_text(json.dumps(db))
    bench = TauBenchBenchmark(data_dir=str(data_copy))
    assert len(task_ids(bench, request(""))) == 10  # `tasks list` does not look at the databases
    with pytest.raises(UsageError, match=r"domains/mock/db.json does not match tau2.s mock data model: 1 validation error for MockDB"):
        task_ids(bench, request("oracle"))


# -- the roles a run needs ---------------------------------------------------------------------------------------


def test_the_user_simulator_is_required_except_under_the_oracle():
    bench = TauBenchBenchmark()
    with pytest.raises(UsageError, match="needs a user simulator: set --user-model MODEL"):
        task_ids(bench, request("none"))
    assert len(task_ids(bench, request("none", role_models={"user": "mock"}))) == 10
    assert len(task_ids(bench, request("oracle"))) == 10
    assert len(task_ids(bench, request(""))) == 10  # tasks list


def test_a_judge_is_required_only_for_the_selected_tasks_that_need_one():
    bench = TauBenchBenchmark(domain="retail")
    with pytest.raises(UsageError) as raised:
        task_ids(bench, request("none", role_models={"user": "mock"}))
    assert str(raised.value) == ("40 of the 114 selected taubench tasks score NL assertions with an LLM judge: set "
                                 "--judge-model MODEL, or leave those tasks out with -b nl_assertions=exclude")
    with pytest.raises(UsageError, match=r"^1 of the 2 selected"):
        task_ids(bench, request("none", role_models={"user": "mock"}, task_ids=("retail/0", "retail/2")))
    assert task_ids(bench, request("none", role_models={"user": "mock"}, task_ids=("retail/0",))) != []
    assert len(task_ids(bench, request("none", role_models={"user": "mock", "judge": "mock"}))) == 114
    assert len(task_ids(bench, request("oracle"))) == 114  # no model called: NL assertions are left unjudged
    excluded = TauBenchBenchmark(domain="retail", nl_assertions="exclude")
    assert len(task_ids(excluded, request("none", role_models={"user": "mock"}))) == 74


# -- through the real lifecycle ------------------------------------------------------------------------------------


async def test_the_kits_conformance_checks():
    bench = TauBenchBenchmark(domain="airline")
    await check_benchmark(bench, request=default_request(bench, role_models={"user": "mock"}))


async def test_oracle_scores_every_mock_task_as_listed():
    run = await run_benchmark(TauBenchBenchmark, "oracle")
    assert run.exit_code == 0
    expected = {f"mock/{t}": 0.0 if f"mock/{t}" in s.ORACLE_EXCEPTIONS else 1.0 for t in s.tasks("mock")}
    assert run.metric("reward") == expected
    result = run.result("mock/create_task_1")
    assert result.artifacts["official_result"]["termination_reason"] == "user_stop"
    saved = sorted(run.run_dir.glob("artifacts/*/attempt-1/trajectory.json"))
    assert len(saved) == 10
    trajectory = json.loads(saved[0].read_text())
    assert trajectory["mode"] == "oracle" and trajectory["messages"][0]["role"] == "assistant"
    evaluation = result.artifacts["evaluation"]
    assert evaluation["reward_breakdown"] == {"DB": 1.0, "COMMUNICATE": 1.0}
    assert result.metrics == {"reward": 1.0, "db": 1.0, "env_assertion": 1.0, "action": 1.0, "communicate": 1.0}
    assert run.summary["metrics"]["pass_k"][0]["k"] == 1


async def test_a_scripted_conversation_with_a_judge(tmp_path: Path):
    model = ScriptedModel(s.role_responder(judge=s.approving_judge))
    run = await run_benchmark(TauBenchBenchmark, model=model, benchmark_args={"domain": "retail"},
                              task_ids=["retail/2", "retail/5"],
                              role_models={"user": "kit-model", "judge": "kit-model"})
    assert run.exit_code == 0, run.results
    assert run.metric("reward") == {"retail/2": 1.0, "retail/5": 1.0}
    judged = run.result("retail/2")
    assert judged.metrics["nl_assertion"] == 1.0
    assert judged.artifacts["evaluation"]["reward_breakdown"] == {"DB": 1.0, "NL_ASSERTION": 1.0}
    # NL_ASSERTION is in retail/5's basis, but it has no assertions: 1.0 without asking the judge (as upstream)
    assert run.result("retail/5").metrics["nl_assertion"] == 1.0
    roles = [s.role_of(r) for r in model.requests]
    assert set(roles) == {"agent", "user", "judge"} and roles.count("judge") == 1
    assert all(r.get("temperature") == 0.0 for r in model.requests)


async def test_errors_are_kept_apart():
    def agent_fails(body):  # type: ignore[no-untyped-def]
        if s.role_of(body) == "user":
            return {"content": "hi"}
        return 400, {"error": {"message": "the agent model refused"}}

    run = await run_benchmark(TauBenchBenchmark, model=ScriptedModel(agent_fails),
                              task_ids=["mock/create_task_1"], role_models={"user": "kit-model"})
    result = run.result("mock/create_task_1")
    assert result.status is TaskStatus.RUN_ERROR and "the agent model refused" in (result.error or "")

    def never_creates(body):  # type: ignore[no-untyped-def]
        return {"content": "###STOP###" if s.role_of(body) == "user" else "ok"}

    # the env assertion names task_2, which does not exist: tau2's evaluator raises, so the verifier fails
    run = await run_benchmark(TauBenchBenchmark, model=ScriptedModel(never_creates),
                              task_ids=["mock/create_task_1_with_env_assertions", "mock/create_task_1"],
                              role_models={"user": "kit-model"})
    failed = run.result("mock/create_task_1_with_env_assertions")
    assert failed.status is TaskStatus.EVAL_ERROR and "Task task_2 not found" in (failed.error or "")
    assert run.result("mock/create_task_1").metrics["reward"] == 0.0

    def chatty(body):  # type: ignore[no-untyped-def]
        return {"content": "and another thing"}

    run = await run_benchmark(TauBenchBenchmark, model=ScriptedModel(chatty), task_ids=["mock/create_task_1"],
                              role_models={"user": "kit-model"}, benchmark_args={"max_steps": "6"})
    result = run.result("mock/create_task_1")
    assert result.status is TaskStatus.COMPLETED and result.metrics == {"reward": 0.0}
    assert result.artifacts["official_result"]["termination_reason"] == "max_steps"
    assert result.artifacts["evaluation"]["info"]["note"].endswith("Termination reason: max_steps")


async def test_a_message_tau2_cannot_take_is_retried_as_tau2_retries():
    def empty_agent(body):  # type: ignore[no-untyped-def]
        return {"content": "hi"} if s.role_of(body) == "user" else {"content": ""}

    run = await run_benchmark(TauBenchBenchmark, model=ScriptedModel(empty_agent), task_ids=["mock/create_task_1"],
                              role_models={"user": "kit-model"}, retries=1)
    result = run.result("mock/create_task_1")
    assert result.status is TaskStatus.RUN_ERROR and "empty message" in (result.error or "")
    assert result.attempt == 2 and len(run.attempts) == 1  # the first attempt was retried


def test_the_baked_docker_image_recycles_its_containers_and_nothing_else_does():
    """Only the runner runs in a taubench environment, so under docker (the baked image) one task's container,
    once reset, may serve the next (``EnvironmentSpec.recycle``); uploads (``bake=false``) and ``local`` keep
    their default."""
    bench = TauBenchBenchmark(domain="mock")
    task = next(iter(bench.load_tasks(request("oracle"))))
    assert bench.environment_spec(task, request("oracle", environment="docker")).recycle is True
    assert bench.environment_spec(task, request("oracle", environment="local")).recycle is False
    unbaked = TauBenchBenchmark(domain="mock", bake="false")
    assert unbaked.environment_spec(task, request("oracle", environment="docker")).recycle is False
