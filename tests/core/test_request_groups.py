"""The request in groups: every option in one place, the 0.1.0 flat names still working (with a warning naming
the new place), ``run.json`` keeping the request by option name and reading both forms."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest
from agentcompass.runtime import HarnessFreeBenchmark, RunRequest, RunResult, TaskSpec
from agentcompass.runtime.metrics import make_metric_contract
from agentcompass.runtime.types import REQUEST_OPTIONS, Budget, Schedule, TaskSelection
from agentcompass.serialization import converter, request_from_json, unstructure
from agentcompass.testing import run_benchmark
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples

FLAT = sorted(n for n, (group, _) in REQUEST_OPTIONS.items() if group is not None)


class FlatSquares:
    """A benchmark written against the 0.1.0 request: it reads ``req.limit``, ``req.trials``, ``req.seed`` and
    ``req.concurrency`` as flat attributes."""

    seen: dict[str, object] = {}

    def load_tasks(self, req):
        FlatSquares.seen = {"limit": req.limit, "trials": req.trials, "concurrency": req.concurrency,
                            "max_cost": req.max_cost}
        return [TaskSpec(task_id=f"sq{n}", data={"n": n}) for n in range(3)]


class FlatBenchmark(HarnessFreeBenchmark):
    name = "flat_squares"
    metric_contract = make_metric_contract(primary="score", scalar=("score",), bounds={"score": (0, 1)})

    def load_tasks(self, req):
        return FlatSquares().load_tasks(req)

    async def run_task(self, task, prepared, req, plan, env=None):
        return RunResult(task_id=task.task_id, final_answer=str(task.data["n"] ** 2 * req.trials))

    async def evaluate(self, task, prepared, result, req, plan, env=None):
        return replace(result, metrics={"score": 1.0})


async def test_a_plugin_reading_the_flat_request_still_runs_and_is_warned(tmp_path):
    with pytest.warns(DeprecationWarning) as caught:
        outcome = await run_benchmark(FlatBenchmark, run_dir=tmp_path / "run", limit=2, concurrency=3)
    assert outcome.summary["n_finished"] == 2
    said = {str(w.message) for w in caught}
    assert ("RunRequest.limit is the flat request of agentcompass 0.1.0, deprecated and removed in 0.3.0: read it "
            "as req.tasks.limit") in said
    assert {m.split(" ")[0] for m in said} == {"RunRequest.limit", "RunRequest.trials", "RunRequest.concurrency",
                                               "RunRequest.max_cost"}
    assert FlatSquares.seen == {"limit": 2, "trials": 1, "concurrency": 3, "max_cost": None}


def test_flat_construction_still_works_and_warns_with_the_new_place():
    with pytest.warns(DeprecationWarning, match=r"pass the groups instead \(schedule\.concurrency, tasks\.trials\)"):
        req = RunRequest("b", "h", "m", concurrency=3, trials=2)
    assert req.schedule == Schedule(concurrency=3) and req.tasks == TaskSelection(trials=2)
    with pytest.raises(TypeError, match="no option 'concurency'"):
        RunRequest("b", "h", "m", concurency=3)


def test_every_flat_name_reads_its_group_field_with_one_warning():
    req = RunRequest("b", "h", "m").with_options(concurrency=5, max_cost=2.5, task_ids=("a",), cache="c")
    for name in FLAT:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(req, name)
        assert value == req.option(name)
        assert len(caught) == 1 and issubclass(caught[0].category, DeprecationWarning)
        group, attr = REQUEST_OPTIONS[name]
        assert f"req.{group}.{attr}" in str(caught[0].message)
    with pytest.raises(AttributeError):
        req.no_such_option  # noqa: B018


def test_the_groups_hold_what_the_options_say():
    req = RunRequest("b", "h", "m").with_options(max_cost=1.5, max_tokens_per_task=9, limit=3)
    assert req.budget == Budget(max_tokens_per_task=9, max_cost=1.5) and req.tasks.limit == 3
    assert req.with_options(limit=None).tasks == TaskSelection()
    with pytest.raises(KeyError, match="no run option 'nope'"):
        req.with_options(nope=1)


options = st.fixed_dictionaries({}, optional={
    "concurrency": st.integers(1, 64), "trials": st.integers(1, 5), "seed": st.integers(0, 2**31 - 1),
    "max_cost": st.floats(0.01, 100), "timeout": st.floats(1, 1e4), "task_ids": st.lists(st.text(min_size=1),
                                                                                         max_size=3).map(tuple),
    "replay_latency": st.booleans(), "model_aliases": st.dictionaries(st.text(min_size=1), st.just("agent"),
                                                                       max_size=2),
    "executor_args": st.dictionaries(st.text(min_size=1), st.text(), max_size=2), "gateway_host": st.just("::1"),
})


@given(options)
@settings(max_examples=examples(60), deadline=None)
def test_run_json_keeps_the_request_by_option_name_and_reads_it_back(values):
    req = RunRequest("b", "h", "m").with_options(**values)
    data = unstructure(req)
    assert set(data) == set(REQUEST_OPTIONS)  # flat, by option name: as 0.1.0 wrote it
    assert request_from_json(data) == req
    grouped = {name: converter.unstructure(getattr(req, name)) for name in req.__dataclass_fields__}
    assert request_from_json(grouped) == req  # the groups' own form reads too
