"""Differences told from noise: flip rates, the minimum detectable difference (against a simulation of paired
binary outcomes) and the tasks by trials a plan asks for."""

from __future__ import annotations

import math
import random

import pytest
from agentcompass.runtime.metrics import make_metric_contract, verdict_stability
from agentcompass.runtime.statistics import (
    VarianceComponents,
    flip_rate,
    minimum_detectable_difference,
    paired_components,
    paired_stderr,
    t_quantile,
    tasks_needed,
    variance_components,
)
from agentcompass.runtime.types import RunResult, TaskStatus
from hypothesis import given, settings
from hypothesis import strategies as st


@given(st.lists(st.booleans(), min_size=1, max_size=10).map(lambda v: [v[0]] * len(v)))
def test_constant_verdicts_never_flip(verdicts: list[bool]) -> None:
    assert flip_rate(verdicts) == 0.0


@given(st.lists(st.booleans(), min_size=1, max_size=20))
def test_a_flip_rate_is_the_minority_share(verdicts: list[bool]) -> None:
    rate = flip_rate(verdicts)
    assert 0.0 <= rate <= 0.5
    assert rate == min(verdicts.count(True), verdicts.count(False)) / len(verdicts)


def test_the_summary_counts_the_tasks_that_flip_and_an_errored_trial_fails() -> None:
    contract = make_metric_contract("reward", binary=True)
    results = [RunResult(task_id="steady", trial=t, metrics={"reward": 1.0}) for t in (1, 2, 3)]
    results += [RunResult(task_id="coin", trial=1, metrics={"reward": 1.0}),
                RunResult(task_id="coin", trial=2, metrics={"reward": 0.0}),
                RunResult(task_id="coin", trial=3, status=TaskStatus.RUN_ERROR, error="boom")]
    v = verdict_stability(contract, results)
    assert v.flip_rates == {"coin": 1 / 3, "steady": 0.0}
    assert v.n_flipping == 1 and v.n_tasks == 2 and v.mean_flip_rate == 1 / 6


@given(st.floats(0.0, 0.25), st.floats(0.001, 0.25), st.integers(2, 500), st.integers(1, 20))
def test_the_mde_shrinks_as_trials_grow(between: float, within: float, tasks: int, trials: int) -> None:
    c = VarianceComponents(between, within, tasks, trials)
    assert (minimum_detectable_difference(paired_stderr(c, tasks, trials + 1))
            < minimum_detectable_difference(paired_stderr(c, tasks, trials)))  # type: ignore[operator]


def _simulate(rng: random.Random, base: list[float], spread: list[float], difference: float, trials: int
              ) -> tuple[list[list[float]], list[list[float]]]:
    """Paired binary outcomes: task ``i`` succeeds with ``base[i]`` for A and ``base[i] + spread[i] +
    difference`` for B."""
    a = [[float(rng.random() < p) for _ in range(trials)] for p in base]
    b = [[float(rng.random() < p + s + difference) for _ in range(trials)] for p, s in zip(base, spread, strict=True)]
    return a, b


def _detected(a: list[list[float]], b: list[list[float]]) -> bool:
    diffs = [sum(y) / len(y) - sum(x) / len(x) for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    mean = sum(diffs) / n
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n)
    return se > 0 and abs(mean) > t_quantile(0.975, n - 1) * se


@settings(max_examples=6, deadline=None)
@given(st.integers(120, 240), st.integers(1, 4), st.floats(0.0, 0.08), st.integers(0, 2**32 - 1))
def test_at_the_mde_a_simulated_comparison_has_80_percent_power(tasks: int, trials: int, interaction: float,
                                                                 seed: int) -> None:
    """The MDE from a pilot's variance components is the difference a simulation finds 80% of the time (within
    10%): the pilot estimates the components, the simulation runs at the MDE they give."""
    rng = random.Random(seed)
    base = [rng.uniform(0.25, 0.6) for _ in range(tasks)]
    spread = [rng.choice((-interaction, interaction)) for _ in range(tasks)]
    pilot = paired_components(*_simulate(rng, base, spread, 0.0, 20))
    assert pilot is not None
    mde = minimum_detectable_difference(paired_stderr(pilot, tasks, trials))
    assert mde is not None
    runs = 400
    power = sum(_detected(*_simulate(rng, base, spread, mde, trials)) for _ in range(runs)) / runs
    assert abs(power - 0.8) <= 0.08, (power, mde)


def test_the_variance_components_of_clusters_recover_the_truth() -> None:
    rng = random.Random(7)
    means = [rng.gauss(0.0, 0.3) for _ in range(2000)]
    clusters = [[m + rng.gauss(0.0, 0.5) for _ in range(4)] for m in means]
    c = variance_components(clusters)
    assert c is not None
    assert c.between == pytest.approx(0.09, rel=0.1)
    assert c.within == pytest.approx(0.25, rel=0.05)


def test_a_plan_needs_fewer_tasks_with_more_trials_and_more_for_a_smaller_difference() -> None:
    c = VarianceComponents(0.01, 0.2, 50, 3)
    assert tasks_needed(c, 0.05, 1) > tasks_needed(c, 0.05, 3) > tasks_needed(c, 0.05, 10)
    assert tasks_needed(c, 0.02, 3) > tasks_needed(c, 0.05, 3)
    # at the planned size the MDE is at most the difference
    n = tasks_needed(c, 0.05, 3)
    assert minimum_detectable_difference(paired_stderr(c, n, 3)) <= 0.05  # type: ignore[operator]
