"""The swebench benchmark without an engine: dataset files and their errors, options, image names, the
prediction files, the instruction, and grading by the package's own functions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.resolve import task_timeouts
from agentcompass.runtime import HarnessFreeBenchmark, PreparedTask, RunRequest
from agentcompass_swebench.benchmark import SWEBench, SWEBenchPredictions, make_swebench
from agentcompass_swebench.dataset import Instance, check_instance
from agentcompass_swebench.grading import grade_log
from agentcompass_swebench.images import ImageNaming, ImagePolicy
from agentcompass_swebench.predictions import read_predictions, write_run_predictions
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples
from tests.swebench.instances import Suite


def _write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _error(tmp_path: Path, rows: list[object] | str, suffix: str = ".jsonl") -> str:
    path = tmp_path / f"data{suffix}"
    if isinstance(rows, str):
        path.write_text(rows)
    else:
        _write_jsonl(path, rows)
    with pytest.raises(UsageError) as info:
        SWEBench(dataset=str(path))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_loads_instances_with_category_and_instruction(swebench_rows: Suite) -> None:
    bench = SWEBench(dataset=str(swebench_rows.dataset))
    tasks = list(bench.load_tasks(RunRequest("swebench", "nop", "mock", environment="docker")))
    assert [t.task_id for t in tasks] == list(swebench_rows.rows)
    calc = next(t for t in tasks if t.task_id == "acme__calc-1")
    assert calc.category == "acme/calc"
    text = bench.instruction(calc, PreparedTask(calc.task_id))
    assert text == swebench_rows.rows["acme__calc-1"]["problem_statement"]
    assert "Hints" not in text and "diff --git" not in text  # neither the gold patch nor the tests
    hinted = SWEBench(dataset=str(swebench_rows.dataset), hints="true")
    assert hinted.instruction(calc, PreparedTask(calc.task_id)).endswith("Hints:\nLook at the operator in add().\n")


def test_each_instance_declares_an_evaluate_phase_that_fits_the_official_test_timeout(swebench_rows: Suite) -> None:
    req = RunRequest("swebench", "nop", "mock", environment="docker")
    tasks = list(SWEBench(dataset=str(swebench_rows.dataset)).load_tasks(req))
    merged = task_timeouts(SWEBench(dataset=str(swebench_rows.dataset)), req, tasks)
    assert {merged[t.task_id]["evaluate"] for t in tasks} == {1800 + 60}  # upstream's 1800 s, plus the slack
    short = task_timeouts(SWEBench(dataset=str(swebench_rows.dataset), eval_timeout="30"), req, tasks)
    assert {short[t.task_id]["evaluate"] for t in tasks} == {90}
    explicit = req.with_options(phase_timeouts={"evaluate": 120.0})  # the user's flag still wins
    assert {task_timeouts(SWEBench(dataset=str(swebench_rows.dataset)), explicit, tasks)[t.task_id]["evaluate"]
            for t in tasks} == {120}


def test_refuses_the_local_environment(swebench_rows: Suite) -> None:
    bench = SWEBench(dataset=str(swebench_rows.dataset))
    with pytest.raises(UsageError, match="--env docker"):
        list(bench.load_tasks(RunRequest("swebench", "nop", "mock", environment="local")))


def test_parquet_and_the_hub_layout(swebench_rows: Suite, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = list(swebench_rows.rows.values())
    (tmp_path / "data").mkdir()
    pq.write_table(pa.Table.from_pylist(rows[:2]), tmp_path / "data" / "test-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist(rows[2:]), tmp_path / "dev.parquet")
    assert list(SWEBench(dataset=str(tmp_path)).instances) == [r["instance_id"] for r in rows[:2]]
    assert list(SWEBench(dataset=str(tmp_path), split="dev").instances) == [r["instance_id"] for r in rows[2:]]
    single = SWEBench(dataset=str(tmp_path / "dev.parquet"))
    assert list(single.instances) == [r["instance_id"] for r in rows[2:]]
    # a split column (a task repository's export) selects rows
    marked = [{**r, "split": "test" if i % 2 else "dev"} for i, r in enumerate(rows)]
    path = _write_jsonl(tmp_path / "marked.jsonl", marked)
    assert list(SWEBench(dataset=str(path), split="dev").instances) == [r["instance_id"] for r in rows[::2]]


def test_malformed_files_and_instances_are_one_line_errors(swebench_rows: Suite, tmp_path: Path) -> None:
    good = swebench_rows.rows["acme__calc-1"]
    assert "line 2 is not JSON" in _error(tmp_path, json.dumps(good) + "\n{not json\n")
    assert "not a readable Parquet file" in _error(tmp_path, "PAR1 nonsense", ".parquet")
    message = _error(tmp_path, [{k: v for k, v in good.items() if k not in ("image", "eval_script")}])
    assert "data.jsonl:1 (instance 'acme__calc-1'): missing image, eval_script" in message
    assert "before 5.0" in message
    assert "FAIL_TO_PASS is not a JSON list" in _error(tmp_path, [{**good, "FAIL_TO_PASS": "[oops"}])
    assert "log_parser 'parse_log_nothing'" in _error(tmp_path, [{**good, "log_parser": "parse_log_nothing"}])
    assert "eval_type 'sometimes'" in _error(tmp_path, [{**good, "eval_type": "sometimes"}])
    assert "appears twice" in _error(tmp_path, [good, good])
    assert "data.jsonl:1: an instance is a JSON object, not list" in _error(tmp_path, [[1, 2]])
    with pytest.raises(UsageError, match="no such file or directory"):
        SWEBench(dataset=str(tmp_path / "missing.jsonl"))
    with pytest.raises(UsageError, match="needs -b dataset=NAME or FILE"):
        SWEBench()
    with pytest.raises(UsageError, match="unknown option"):
        SWEBench(dataset=str(swebench_rows.dataset), datset="x")
    with pytest.raises(UsageError, match="not in"):
        SWEBench(dataset=str(swebench_rows.dataset), instance_ids="acme__calc-1,nope")
    assert list(SWEBench(dataset=str(swebench_rows.dataset), instance_ids="acme__calc-1").instances) == [
        "acme__calc-1"]


def test_image_names() -> None:
    row = {"instance_id": "django__django-11099", "image": "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"}
    instance = Instance(row=row, source="x")
    assert ImageNaming().ref(instance) == row["image"]
    assert ImageNaming(namespace="mirror.local:5000/sb").ref(instance) == \
        "mirror.local:5000/sb/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert ImageNaming(template="reg/{id}:v1").ref(instance) == "reg/django_1776_django-11099:v1"
    assert ImageNaming(template="{image}").ref(instance) == row["image"]
    with pytest.raises(UsageError, match="not a valid template"):
        ImageNaming(template="reg/{nope}")
    with pytest.raises(UsageError, match="task_repo"):
        ImagePolicy(build="local")
    with pytest.raises(UsageError, match="expected no or local"):
        ImagePolicy(build="remote")


def test_predictions_pick_the_harness_free_kind(swebench_rows: Suite, tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "preds.jsonl", [
        {"instance_id": "acme__calc-1", "model_name_or_path": "m", "model_patch": "x"}])
    bench = make_swebench(dataset=str(swebench_rows.dataset), predictions=str(path))
    assert isinstance(bench, SWEBenchPredictions) and isinstance(bench, HarnessFreeBenchmark)
    assert list(bench.instances) == ["acme__calc-1"] and bench.required_model_roles == ()
    assert not isinstance(make_swebench(dataset=str(swebench_rows.dataset)), HarnessFreeBenchmark)
    with pytest.raises(UsageError, match="harness 'none'"):
        SWEBench(dataset=str(swebench_rows.dataset), predictions=str(path))
    unknown = _write_jsonl(tmp_path / "unknown.jsonl", [{"instance_id": "other", "model_patch": ""}])
    with pytest.raises(UsageError, match="not in the dataset: other"):
        read_predictions(unknown, {"acme__calc-1"})
    as_dict = tmp_path / "preds.json"
    as_dict.write_text(json.dumps({"acme__calc-1": {"instance_id": "acme__calc-1", "model_patch": None}}))
    assert read_predictions(as_dict, {"acme__calc-1"})["acme__calc-1"]["model_patch"] is None
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "acme__calc-1"}\n[1]\n')
    with pytest.raises(UsageError, match=r"bad\.jsonl line 2: a prediction is an object"):
        read_predictions(bad, {"acme__calc-1"})


def test_run_predictions_are_written_from_final_results(tmp_path: Path) -> None:
    results = [{"task_id": "a__b-1", "trial": 1, "attempt": 1}, {"task_id": "a__b-1", "trial": 1, "attempt": 2},
               {"task_id": "c__d-2", "trial": 1, "attempt": 1}]
    _write_jsonl(tmp_path / "results.jsonl", results)
    patch = tmp_path / "artifacts" / "a__b-1" / "attempt-2" / "model.patch"
    patch.parent.mkdir(parents=True)
    patch.write_bytes(b"diff --git a/x b/x\n")
    (tmp_path / "results.jsonl").open("a").write('{"task_id": "torn')
    written = write_run_predictions(tmp_path, "react/mock")
    assert written == [tmp_path / "predictions.jsonl"]
    lines = [json.loads(line) for line in written[0].read_text().splitlines()]
    assert lines == [{"instance_id": "a__b-1", "model_name_or_path": "react/mock", "model_patch": "diff --git a/x b/x\n"},
                     {"instance_id": "c__d-2", "model_name_or_path": "react/mock", "model_patch": None}]


STATUSES = st.sampled_from(["PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", None])


@settings(max_examples=examples(60), deadline=None)
@given(add=STATUSES, mul=STATUSES, markers=st.booleans(), exit_code=st.sampled_from([None, 0, 1]))
def test_grading_is_the_package_s(swebench_rows: Suite, add: str | None, mul: str | None, markers: bool,
                                  exit_code: int | None) -> None:
    """Whatever the log says, the verdict is get_eval_report's and the fractions are the report's counts."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    row = swebench_rows.rows["acme__calc-1"]
    lines = [f"{status} tests/test_calc.py::test_{name}" for name, status in (("add", add), ("mul", mul)) if status]
    body = "\n".join(["============ short test summary info ============", *lines])
    log = f"+ : '>>>>> Start Test Output'\n{body}\n+ : '>>>>> End Test Output'\n" if markers else body
    if exit_code is not None:
        log += f">>>>> Test Exit Code: {exit_code}\n"
    verdict = grade_log(check_instance(row, "row"), log, "diff", "m")
    path = Path(f"/tmp/agentcompass-h25-{id(log)}.log")
    path.write_text(log)
    try:
        direct = get_eval_report(make_test_spec(row), {"instance_id": row["instance_id"], "model_patch": "diff",
                                                       "model_name_or_path": "m"}, str(path), True)
    finally:
        path.unlink()
    assert verdict.report == direct["acme__calc-1"]
    assert verdict.resolved == direct["acme__calc-1"]["resolved"]
    tests = direct["acme__calc-1"].get("tests_status")
    if tests:
        assert verdict.fail_to_pass == len(tests["FAIL_TO_PASS"]["success"]) / 1
        assert verdict.pass_to_pass == len(tests["PASS_TO_PASS"]["success"]) / 1
        assert verdict.resolved == (add in ("PASSED", "XFAIL") and mul in ("PASSED", "XFAIL", "SKIPPED"))
    else:
        assert verdict.metrics() == {"resolved": 0.0, "fail_to_pass": 0.0, "pass_to_pass": 0.0}
