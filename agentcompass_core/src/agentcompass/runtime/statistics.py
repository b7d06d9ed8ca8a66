"""The estimators behind ``summary.json``: clustered standard errors, pass@k and pass^k.

* **Clustered standard error** of a mean over all trials (Miller, "Adding Error Bars to Evals", 2024): trials
  of one task are not independent, so the task is the cluster. For values ``x[c][i]`` (cluster ``c``, trial
  ``i``), ``n`` values in all, ``C`` clusters and mean ``m``::

      ``SE = sqrt( C / (C - 1) * sum_c ( sum_i (x[c][i] - m) )^2 ) / n``

  With one trial per task this is the ordinary standard error of the mean, ``sqrt(s^2 / n)`` with the sample
  variance ``s^2``; with several, it grows with how alike a task's trials are.
* **95% intervals** (:func:`mean_interval`) that hold for small samples and never leave the metric's range:

  - a *success rate* (every value at one end of the metric's declared bounds, e.g. 0/1 rewards): the **Wilson
    score interval** (Wilson 1927), which is never zero-width and never leaves [0, 1]. With several trials per
    task the trials of a task are not independent, so the ``n`` in Wilson's formula is the **effective sample
    size** ``n / deff`` (Kish's design effect ``deff = SE_clustered^2 / SE_independent^2``, both computed by the
    formula above, held within ``[C, n]``: at most one sample per trial, at least one per task; with no
    variation at all, when ``deff`` cannot be estimated, ``C``). With one trial per task it is the plain Wilson
    interval.
  - any other mean: a **t interval** ``m ± t(0.975, C - 1) · SE`` with ``C - 1`` degrees of freedom (C tasks),
    clipped to the bounds the metric contract declares (``make_metric_contract(..., bounds=(0, 1))``; a binary
    contract implies it for its success metric). Bounds that a value breaks are not trusted (no clipping).
    A metric that declares no bounds and whose every value lies in [0, 1] is taken to be a share: its bounds
    are [0, 1] (:func:`inferred_bounds`), so a plugin that forgets to declare them never gets an interval
    outside its range.
  - fewer than :data:`MIN_TASKS` tasks: no interval ("too few tasks").
* **pass@k** (Chen et al., 2021): the chance that at least one of ``k`` trials drawn from a task's ``n``
  succeeds, ``1 - C(n - c, k) / C(n, k)`` for ``c`` successes, averaged over tasks.
* **pass^k** (Yao et al., 2024, tau-bench): the chance that all ``k`` drawn trials succeed,
  ``C(c, k) / C(n, k)``, averaged over tasks.

Both are computed for ``k = 1 .. n`` over the tasks that have at least ``k`` trials; an errored trial counts as
a failure.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: The normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054
#: Fewer tasks than this and no interval means anything ("too few tasks").
MIN_TASKS = 2
#: The words shown where :func:`mean_interval` gives no interval.
TOO_FEW_TASKS = "too few tasks"


#: The bounds of a metric that declares none and whose every value lies within them: a share.
UNIT_INTERVAL = (0.0, 1.0)


def inferred_bounds(declared: tuple[float, float] | None, values: Iterable[float]) -> tuple[float, float] | None:
    """``declared`` when a metric declares its bounds; else :data:`UNIT_INTERVAL` when every value it took lies in
    [0, 1]; else ``None`` (an unbounded metric)."""
    if declared is not None:
        return declared
    seen = False
    for value in values:
        if not UNIT_INTERVAL[0] <= value <= UNIT_INTERVAL[1]:
            return None
        seen = True
    return UNIT_INTERVAL if seen else None


def clustered_stderr(clusters: Iterable[Sequence[float]]) -> float | None:
    """The cluster-robust standard error of the mean of every value (``None`` with fewer than two clusters)."""
    groups = [list(g) for g in clusters if len(g)]
    n = sum(len(g) for g in groups)
    c = len(groups)
    if c < 2:
        return None
    mean = sum(sum(g) for g in groups) / n
    spread = sum((sum(g) - len(g) * mean) ** 2 for g in groups)
    return math.sqrt(c / (c - 1) * spread) / n


def confidence_interval(mean: float | None, stderr: float | None, z: float = Z95) -> tuple[float, float] | None:
    """The normal interval ``mean ± z · stderr`` (unbounded; :func:`mean_interval` is what summaries use)."""
    if mean is None or stderr is None:
        return None
    return (mean - z * stderr, mean + z * stderr)


@dataclass(frozen=True)
class Interval:
    """A 95% interval and how it was made: ``"wilson"`` (a success rate) or ``"t"`` (any other mean)."""

    low: float
    high: float
    method: str


def wilson_interval(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` observed over ``n`` (possibly effective) samples."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0))
    return max(0.0, centre - half), min(1.0, centre + half)


def _betacf(a: float, b: float, x: float) -> float:
    # The continued fraction of the regularized incomplete beta function (Numerical Recipes, 6.4).
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function with ``df`` degrees of freedom."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@functools.lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on :func:`t_cdf`)."""
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    return (low + high) / 2.0


def mean_interval(clusters: Iterable[Sequence[float]], bounds: tuple[float, float] | None = None
                  ) -> Interval | None:
    """The 95% interval of the mean of every value, clustered by task (see the module's docstring); ``None``
    with fewer than :data:`MIN_TASKS` clusters."""
    groups = [list(g) for g in clusters if len(g)]
    values = [x for g in groups for x in g]
    n, c = len(values), len(groups)
    if c < MIN_TASKS:
        return None
    mean = sum(values) / n
    if bounds is not None and not all(bounds[0] <= x <= bounds[1] for x in values):
        bounds = None  # the declaration is wrong for these values: do not clip to it
    if bounds is not None and bounds[1] > bounds[0] and all(x in bounds for x in values):
        low, span = bounds[0], bounds[1] - bounds[0]
        p = (mean - low) / span
        scaled = [[(x - low) / span for x in g] for g in groups]
        clustered = clustered_stderr(scaled) or 0.0
        independent = clustered_stderr([[x] for g in scaled for x in g]) or 0.0
        if independent > 0 and clustered > 0:
            n_eff = min(max(n * independent**2 / clustered**2, c), n)
        elif independent > 0:
            n_eff = float(n)  # the tasks agree exactly: every trial counts
        else:
            n_eff = float(c)  # no variation at all: one sample per task
        lo, hi = wilson_interval(p, n_eff)
        return Interval(low + lo * span, low + hi * span, "wilson")
    stderr = clustered_stderr(groups) or 0.0
    half = t_quantile(0.975, c - 1) * stderr
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return Interval(lo, hi, "t")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with ``n`` trials of which ``c`` succeeded (``k <= n``)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of one task with ``n`` trials of which ``c`` succeeded (``k <= n``)."""
    return math.comb(c, k) / math.comb(n, k)


def pass_curves(outcomes: Mapping[str, tuple[int, int]], max_k: int) -> list[tuple[int, float, float, int]]:
    """``(k, pass@k, pass^k, tasks counted)`` for ``k = 1 .. max_k`` from ``{task: (trials, successes)}``."""
    curves = []
    for k in range(1, max_k + 1):
        counted = [(n, c) for n, c in outcomes.values() if n >= k]
        if not counted:
            break
        curves.append((
            k,
            sum(pass_at_k(n, c, k) for n, c in counted) / len(counted),
            sum(pass_hat_k(n, c, k) for n, c in counted) / len(counted),
            len(counted),
        ))
    return curves


# -- verdict stability and the power of a comparison ---------------------------------------------------------

#: The normal quantile of 80% power.
Z80 = 0.8416212335729143
#: ``z(0.975) + z(0.8)``: a paired difference this many standard errors from zero is found 80% of the time by a
#: two-sided 5% test (the normal approximation; with few tasks the t test's power is a little lower).
DETECTION_FACTOR = Z95 + Z80


def flip_rate(verdicts: Sequence[bool]) -> float:
    """The share of a task's trials whose verdict differs from the task's majority verdict: ``min(passes,
    fails) / trials`` (0 for constant verdicts and for one trial; 0.5 at most, a tie)."""
    if not verdicts:
        return 0.0
    passes = sum(1 for v in verdicts if v)
    return min(passes, len(verdicts) - passes) / len(verdicts)


def minimum_detectable_difference(stderr: float | None) -> float | None:
    """The smallest true difference a two-sided 5% test finds with 80% power, given the standard error of the
    paired difference: ``(z(0.975) + z(0.8)) · SE`` (``None`` without a standard error)."""
    return None if stderr is None else DETECTION_FACTOR * stderr


@dataclass(frozen=True)
class VarianceComponents:
    """How much a per-task value varies: ``between`` tasks (the variance of the tasks' true means) and
    ``within`` a task (the variance of one trial around its task's mean), estimated from a pilot of ``n_tasks``
    tasks with ``trials`` trials each (one-way random-effects ANOVA, method of moments)."""

    between: float
    within: float
    n_tasks: int
    trials: float


def variance_components(clusters: Iterable[Sequence[float]]) -> VarianceComponents | None:
    """The variance components of values clustered by task; ``None`` with fewer than two tasks. With one trial
    per task the within-task variance cannot be told from the between-task one: it is all counted as between
    (the conservative choice for planning more trials)."""
    groups = [list(g) for g in clusters if len(g)]
    if len(groups) < 2:
        return None
    means = [sum(g) / len(g) for g in groups]
    grand = sum(means) / len(means)
    spread_of_means = sum((m - grand) ** 2 for m in means) / (len(means) - 1)
    within_df = sum(len(g) - 1 for g in groups)
    within = (sum((x - m) ** 2 for g, m in zip(groups, means, strict=True) for x in g) / within_df
              if within_df else 0.0)
    # The harmonic mean of the trial counts: what each task's mean is averaged over.
    trials = len(groups) / sum(1 / len(g) for g in groups)
    between = max(spread_of_means - within / trials, 0.0)
    return VarianceComponents(between, within, len(groups), trials)


def paired_stderr(components: VarianceComponents, n_tasks: int, trials: int) -> float:
    """The standard error of a paired difference over ``n_tasks`` tasks with ``trials`` trials each, from the
    variance components of the per-task differences."""
    return math.sqrt((components.between + components.within / trials) / n_tasks)


def tasks_needed(components: VarianceComponents, difference: float, trials: int) -> int:
    """The tasks a paired comparison with ``trials`` trials each needs to find ``difference`` with 80% power at
    5% two-sided: ``ceil(((z(0.975) + z(0.8)) / difference)^2 · (between + within / trials))``, at least 2."""
    variance = components.between + components.within / trials
    return max(2, math.ceil((DETECTION_FACTOR / abs(difference)) ** 2 * variance))


def paired_components(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> VarianceComponents | None:
    """The variance components of the per-task difference ``mean(b_i) - mean(a_i)`` of two runs over the same
    tasks (``a[i]``, ``b[i]``: task ``i``'s trial values): ``within`` is the sum of the two runs' within-task
    variances, ``between`` what the differences vary beyond it (the task by run interaction). ``None`` with
    fewer than two tasks."""
    pairs = [(list(x), list(y)) for x, y in zip(a, b, strict=True) if len(x) and len(y)]
    if len(pairs) < 2:
        return None
    ca = variance_components(x for x, _ in pairs)
    cb = variance_components(y for _, y in pairs)
    assert ca is not None and cb is not None
    diffs = [sum(y) / len(y) - sum(x) / len(x) for x, y in pairs]
    mean = sum(diffs) / len(diffs)
    spread = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    between = max(spread - ca.within / ca.trials - cb.within / cb.trials, 0.0)
    return VarianceComponents(between, ca.within + cb.within, len(pairs), min(ca.trials, cb.trials))


def unpaired_components(pilot: VarianceComponents) -> VarianceComponents:
    """The components of the difference of two runs that each vary as ``pilot`` does, taken as independent:
    twice each (conservative: runs of one benchmark usually agree on which tasks are hard, which pairing
    removes)."""
    return VarianceComponents(2 * pilot.between, 2 * pilot.within, pilot.n_tasks, pilot.trials)
