"""A metric contract's ``aggregates``: run-level figures besides the mean (``sum``, ``min``, ``max``), over every
result as the mean is (an errored result counting 0), kept in ``run.json``'s contract and shown in the summary."""

from __future__ import annotations

import pytest
from agentcompass.cli.render import summary_text
from agentcompass.results.summary import build_summary, contract_json
from agentcompass.runtime import RunRequest, RunResult, TaskSpec, TaskStatus
from agentcompass.runtime.metrics import aggregate_group, contract_from_json, make_metric_contract
from hypothesis import given
from hypothesis import strategies as st


def results(values: list[float | None]) -> list[RunResult]:
    return [RunResult(task_id=f"t{i}", status=TaskStatus.COMPLETED, metrics={"score": v}) if v is not None else
            RunResult(task_id=f"t{i}", status=TaskStatus.RUN_ERROR, error="boom") for i, v in enumerate(values)]


@given(st.lists(st.one_of(st.none(), st.floats(-5, 5, allow_nan=False)), min_size=1, max_size=12))
def test_each_figure_is_over_every_result_an_errored_one_counting_0(values: list[float | None]) -> None:
    contract = make_metric_contract("score", aggregates=("sum", "min", "max"))
    counted = [0.0 if v is None else v for v in values]
    figures = aggregate_group(contract, results(values)).metrics["score"].aggregates
    assert figures == {"sum": pytest.approx(sum(counted)), "min": min(counted), "max": max(counted)}


def test_no_aggregates_by_default_and_none_without_results() -> None:
    assert aggregate_group(make_metric_contract("score"), results([1.0])).metrics["score"].aggregates == {}
    contract = make_metric_contract("score", aggregates=("sum",))
    assert aggregate_group(contract, []).metrics["score"].aggregates == {}


def test_an_unknown_aggregate_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"\['median'\] are not among \['max', 'min', 'sum'\]"):
        make_metric_contract("score", aggregates=("median",))
    assert make_metric_contract("score", aggregates=("mean", "sum")).aggregates == ("sum",)


def test_the_contract_keeps_them_through_run_json_and_the_summary_shows_them() -> None:
    contract = make_metric_contract("score", labels={"score": "Score"}, aggregates=("sum", "max"))
    assert contract_from_json(contract_json(contract)).aggregates == ("sum", "max")
    work = [(TaskSpec(task_id=f"t{i}"), 1) for i in range(3)]
    final = {(r.task_id, 1): r for r in results([1.0, None, 0.5])}
    summary = build_summary(RunRequest(benchmark="b", harness="h", model="m"), contract, work, final,
                            interrupted=False, stopped_reason=None, duration_s=1.0, run_dir="/tmp/r")
    assert summary.metrics.overall["score"].aggregates == {"sum": 1.5, "max": 1.0}
    assert "Score: sum=1.5000  max=1.0000  (over every result, errored ones counting 0)" in summary_text(summary)
