"""95% intervals (issue 21, item 2): Wilson for success rates (clustered by task), t intervals clipped to the
contract's bounds, "too few tasks" — checked for coverage on simulated data and for their range, and shown the
same in the console, summary.json and the report."""

from __future__ import annotations

import json
import math
import random

import pytest
from agentcompass.cli.render import summary_text
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.runtime.metrics import aggregate, contract_from_json, make_metric_contract
from agentcompass.runtime.statistics import TOO_FEW_TASKS, mean_interval, t_quantile, wilson_interval
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.cli_processes import run_cli_subprocess

unit_clusters = st.lists(st.lists(st.floats(0, 1), min_size=1, max_size=6), min_size=2, max_size=15)
binary_clusters = st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=6), min_size=2, max_size=15)


@given(st.one_of(unit_clusters, binary_clusters))
def test_an_interval_never_leaves_the_declared_range_and_holds_the_mean(groups):
    interval = mean_interval(groups, (0.0, 1.0))
    values = [x for g in groups for x in g]
    mean = sum(values) / len(values)
    assert interval is not None
    assert 0.0 <= interval.low <= mean + 1e-12 and mean - 1e-12 <= interval.high <= 1.0


@given(binary_clusters)
def test_a_success_rate_never_gets_a_zero_width_interval(groups):
    interval = mean_interval(groups, (0.0, 1.0))
    assert interval is not None and interval.method == "wilson" and interval.high - interval.low > 0.05


@given(st.lists(st.lists(st.floats(2, 7), min_size=1, max_size=4), min_size=2, max_size=10))
def test_other_bounds_are_respected_and_rescaled(groups):
    interval = mean_interval(groups, (2.0, 7.0))
    assert interval is not None and 2.0 <= interval.low <= interval.high <= 7.0


def test_one_task_has_no_interval():
    assert mean_interval([[1.0, 0.0, 1.0]], (0, 1)) is None
    assert mean_interval([[0.3]]) is None


def test_the_issues_examples():
    # update 0.5 ± 0.98 on a 0/1 reward with two tasks: now inside [0, 1]
    assert mean_interval([[1.0], [0.0]], (0, 1)).low >= 0
    # 6 of 6: not [1, 1]
    six = mean_interval([[1.0]] * 6, (0, 1))
    assert six.high == 1.0 and 0.5 < six.low < 0.7
    # each of 2 tasks passed 1 of 2 trials: not 0.5 ± 0
    assert mean_interval([[1.0, 0.0], [0.0, 1.0]], (0, 1)).high - 0.5 > 0.2


def test_t_quantiles_are_students():
    for df, expected in [(1, 12.7062), (2, 4.3027), (5, 2.5706), (30, 2.0423), (1000, 1.9623)]:
        assert math.isclose(t_quantile(0.975, df), expected, abs_tol=1e-4)


def test_wilson_matches_its_formula_at_a_known_point():
    # Wilson (1927) for 8 of 10 at 95%: [0.4902, 0.9433] (Newcombe 1998, table I, method 3).
    low, high = wilson_interval(0.8, 10)
    assert math.isclose(low, 0.4902, abs_tol=1e-4) and math.isclose(high, 0.9433, abs_tol=1e-4)


def _coverage(sample, truth, reps, seed):
    rng = random.Random(seed)
    hits = 0
    for _ in range(reps):
        interval = mean_interval(sample(rng), (0.0, 1.0))
        hits += interval.low <= truth <= interval.high
    return hits / reps


@settings(max_examples=12, deadline=None, derandomize=True)
@given(p=st.floats(0.1, 0.9), tasks=st.sampled_from([5, 10, 30, 150]), trials=st.sampled_from([1, 3]))
def test_success_rate_coverage_is_near_95_percent(p, tasks, trials):
    # Tasks differ in difficulty (Beta with mean p), a task's trials share it: the clustered case.
    def sample(rng):
        out = []
        for _ in range(tasks):
            q = rng.betavariate(4 * p, 4 * (1 - p)) if trials > 1 else p
            out.append([float(rng.random() < q) for _ in range(trials)])
        return out

    coverage = _coverage(sample, p, 400, seed=hash((round(p, 6), tasks, trials)) & 0xFFFF)
    assert (0.87 if tasks < 10 else 0.9) <= coverage <= 0.995, coverage


@settings(max_examples=8, deadline=None, derandomize=True)
@given(a=st.floats(0.5, 5), b=st.floats(0.5, 5), tasks=st.sampled_from([4, 10, 60]))
def test_bounded_mean_coverage_is_near_95_percent(a, b, tasks):
    def sample(rng):
        return [[rng.betavariate(a, b)] for _ in range(tasks)]

    coverage = _coverage(sample, a / (a + b), 400, seed=tasks)
    assert 0.88 <= coverage <= 0.995, coverage


def test_a_binary_contract_implies_bounds_and_explicit_bounds_round_trip():
    contract = make_metric_contract("reward", scalar=("reward", "part"), binary=True)
    assert contract.bounds == {"reward": (0.0, 1.0)}
    both = make_metric_contract("reward", scalar=("reward", "part"), bounds=(0, 1))
    assert both.bounds == {"reward": (0.0, 1.0), "part": (0.0, 1.0)}
    from agentcompass.results.summary import contract_json

    assert contract_from_json(json.loads(json.dumps(contract_json(both)))).bounds == both.bounds
    with pytest.raises(ValueError, match="low < high"):
        make_metric_contract("reward", bounds=(1, 0))


def test_the_console_says_too_few_tasks_and_prints_the_interval_summary_json_holds():
    contract = make_metric_contract("reward", binary=True)
    results = [RunResult(task_id="a", category="x", status=TaskStatus.COMPLETED, metrics={"reward": 1.0}),
               RunResult(task_id="b", category="y", status=TaskStatus.COMPLETED, metrics={"reward": 0.0})]
    overall, metrics = aggregate(contract, results)
    from agentcompass.runtime.records import RunSummary

    summary = RunSummary(run_id="r", benchmark="b", harness="h", model="m", environment="local", n_tasks=2,
                         n_finished=2, status_counts=overall.status_counts, primary_metric="reward", metrics=metrics)
    text = summary_text(summary)
    low, high = metrics.overall["reward"].ci95
    assert f"[{low:.4f}, {high:.4f}]" in text and 0 <= low and high <= 1
    assert TOO_FEW_TASKS in text  # each category has one task


def test_console_summary_json_and_report_show_the_same_bounded_interval(tmp_path):
    out = tmp_path / "run"
    proc = run_cli_subprocess("run", "example_interactive", "none", "mock", "-m", "error_rate=0.5", "--trials", "2",
                              "--seed", "3", "-o", str(out), testing=False)
    assert proc.returncode in (0, 1), proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    groups = [summary["metrics"]["overall"]["score"]] + [
        g["metrics"]["score"] for g in summary["metrics"]["by_category"].values()]
    for m in groups:
        if m["n_tasks"] < 2:
            assert m["ci95"] is None
            continue
        low, high = m["ci95"]
        assert 0 <= low < high <= 1 and m["ci_method"] == "wilson"
    low, high = summary["metrics"]["overall"]["score"]["ci95"]
    assert f"[{low:.4f}, {high:.4f}]" in proc.stdout
    shown = run_cli_subprocess("results", "show", str(out), testing=False)
    assert f"[{low:.4f}, {high:.4f}]" in shown.stdout
    from agentcompass.runtime.run_reader import RunReader
    from agentcompass_report.payload import live_summary, summary_of

    files = RunReader.open(out)
    written, live = summary_of(files)
    assert not live and written["metrics"]["overall"]["score"]["ci95"] == [low, high]
    from agentcompass_report.payload import contract_of

    recomputed = live_summary(files, contract_of(files.info))["metrics"]["overall"]["score"]["ci95"]
    assert list(recomputed) == pytest.approx([low, high])


# Issue 32, item 4: a metric whose values are shares never gets an interval outside [0, 1], even when its
# contract declares no bounds (SWE-bench's fail_to_pass once got [-1.10, 1.77]).

def _results(groups, name="share"):
    return [RunResult(task_id=f"t{i}", status=TaskStatus.COMPLETED, metrics={name: x}, trial=j)
            for i, g in enumerate(groups) for j, x in enumerate(g)]


@given(unit_clusters)
def test_an_undeclared_metric_whose_values_are_shares_stays_in_the_unit_interval(groups):
    contract = make_metric_contract("share")  # no bounds declared
    assert contract.bounds == {}
    overall, _ = aggregate(contract, _results(groups))
    low, high = overall.metrics["share"].ci95
    assert 0.0 <= low <= high <= 1.0


def test_the_issues_swebench_shares_stay_in_the_unit_interval():
    # two tasks, one passing all its FAIL_TO_PASS tests and one none, with one more near zero: the t interval
    # alone is about [-1.1, 1.8]
    from agentcompass_swebench.benchmark import CONTRACT

    assert CONTRACT.bounds == {name: (0.0, 1.0) for name in CONTRACT.scalar}
    groups = [[1.0], [0.0], [0.05]]
    for contract in (CONTRACT, make_metric_contract("resolved", scalar=("resolved", "fail_to_pass"))):
        overall, _ = aggregate(contract, _results(groups, "fail_to_pass"))
        low, high = overall.metrics["fail_to_pass"].ci95
        assert 0.0 <= low <= high <= 1.0


def test_a_metric_with_a_value_outside_the_unit_interval_is_not_clipped():
    contract = make_metric_contract("turns")
    overall, _ = aggregate(contract, _results([[3.0], [0.0], [0.5]], "turns"))
    low, high = overall.metrics["turns"].ci95
    assert low < 0.0 and high > 1.0  # an unbounded count: the plain t interval


@given(st.lists(st.lists(st.floats(0, 1), min_size=1, max_size=3), min_size=2, max_size=8),
       st.lists(st.lists(st.floats(0, 1), min_size=1, max_size=3), min_size=2, max_size=8))
def test_compare_keeps_undeclared_shares_in_range(a_groups, b_groups):
    from agentcompass.results.comparison import LoadedRun, _side, paired_difference

    def run(groups):
        tasks = {f"t{i}": (None, {"share": list(g)}) for i, g in enumerate(groups)}
        return LoadedRun(path=None, info=None, scalars=("share",), tasks=tasks,  # type: ignore[arg-type]
                         contract=make_metric_contract("share"))

    a, b = run(a_groups), run(b_groups)
    shared = sorted(set(a.tasks) & set(b.tasks))
    for side in (a, b):
        object.__setattr__(side, "info", type("Info", (), {"run_id": "r"})())
        ci = _side(side, "share", shared).ci95
        assert ci is not None and 0.0 <= ci[0] <= ci[1] <= 1.0
    diff = paired_difference(a, b, "share", shared).ci95
    assert diff is not None and -1.0 <= diff[0] <= diff[1] <= 1.0
