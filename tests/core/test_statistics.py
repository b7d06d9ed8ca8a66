"""The estimators behind summary.json, checked against brute force and their formulas on random data."""

from __future__ import annotations

import itertools
import math
import random
import statistics

from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.runtime.metrics import aggregate, make_metric_contract
from agentcompass.runtime.statistics import clustered_stderr, pass_at_k, pass_curves, pass_hat_k
from hypothesis import given
from hypothesis import strategies as st

trial_outcomes = st.integers(1, 8).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.booleans(), min_size=n,
                                                                                       max_size=n)))


@given(trial_outcomes, st.integers(1, 8))
def test_pass_at_k_and_pass_hat_k_equal_brute_force_over_every_k_subset(outcome, k):
    n, successes = outcome
    if k > n:
        return
    subsets = list(itertools.combinations(successes, k))
    c = sum(successes)
    assert math.isclose(pass_at_k(n, c, k), sum(any(s) for s in subsets) / len(subsets), abs_tol=1e-12)
    assert math.isclose(pass_hat_k(n, c, k), sum(all(s) for s in subsets) / len(subsets), abs_tol=1e-12)


@given(st.dictionaries(st.text(min_size=1, max_size=4), trial_outcomes, min_size=1, max_size=8))
def test_pass_curves_average_over_tasks_with_enough_trials(tasks):
    outcomes = {t: (n, sum(s)) for t, (n, s) in tasks.items()}
    max_k = max(n for n, _ in outcomes.values())
    curves = pass_curves(outcomes, max_k)
    assert [k for k, *_ in curves] == list(range(1, max_k + 1))
    for k, at, hat, counted in curves:
        eligible = [(n, c) for n, c in outcomes.values() if n >= k]
        assert counted == len(eligible)
        assert math.isclose(at, statistics.fmean(pass_at_k(n, c, k) for n, c in eligible), abs_tol=1e-12)
        assert math.isclose(hat, statistics.fmean(pass_hat_k(n, c, k) for n, c in eligible), abs_tol=1e-12)
        assert hat <= at + 1e-12  # all k succeed is never likelier than any of k
    if curves:
        assert math.isclose(curves[0][1], curves[0][2])  # pass@1 == pass^1: the mean success rate


clusters = st.lists(st.lists(st.floats(0, 1), min_size=1, max_size=6), min_size=0, max_size=12)


@given(clusters)
def test_clustered_stderr_matches_its_formula(groups):
    se = clustered_stderr(groups)
    if len(groups) < 2:
        assert se is None
        return
    values = [x for g in groups for x in g]
    n, c, m = len(values), len(groups), statistics.fmean(values)
    # Miller (2024), eq. for the cluster-robust variance, with the C/(C-1) small-sample factor.
    cross = sum((x - m) * (y - m) for g in groups for x in g for y in g)
    assert math.isclose(se**2, c / (c - 1) * cross / n**2, rel_tol=1e-9, abs_tol=1e-12)


@given(st.lists(st.floats(0, 1), min_size=2, max_size=40))
def test_with_one_trial_per_task_it_is_the_ordinary_standard_error(values):
    se = clustered_stderr([[v] for v in values])
    assert math.isclose(se, statistics.stdev(values) / math.sqrt(len(values)), rel_tol=1e-9, abs_tol=1e-12)


def test_clustering_widens_the_interval_when_a_tasks_trials_agree():
    rng = random.Random(3)
    # Each task is easy or hard, and its 5 trials agree: 20 tasks, not 100 independent samples.
    groups = [[float(rng.random() < 0.5)] * 5 for _ in range(20)]
    naive = statistics.stdev([x for g in groups for x in g]) / math.sqrt(100)
    assert clustered_stderr(groups) > 2 * naive


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 3), st.sampled_from(["ok", "fail", "err"])),
                min_size=1, max_size=40, unique_by=lambda x: (x[0], x[1])))
def test_aggregation_counts_errored_trials_as_failures_in_pass_k(rows):
    contract = make_metric_contract("reward", binary=True)
    results = [RunResult(task_id=f"t{t}", trial=trial,
                         status=TaskStatus.RUN_ERROR if kind == "err" else TaskStatus.COMPLETED,
                         metrics={} if kind == "err" else {"reward": 1.0 if kind == "ok" else 0.0})
               for t, trial, kind in rows]
    overall, metrics = aggregate(contract, results)
    assert overall.n_errored_trials == sum(kind == "err" for *_, kind in rows)
    by_task: dict[str, list[str]] = {}
    for t, _, kind in rows:
        by_task.setdefault(f"t{t}", []).append(kind)
    expected_pass1 = statistics.fmean(sum(k == "ok" for k in ks) / len(ks) for ks in by_task.values())
    assert math.isclose(metrics.pass_k[0].pass_hat_k, expected_pass1, abs_tol=1e-12)
    assert metrics.overall["reward"].n_tasks == len(by_task)
