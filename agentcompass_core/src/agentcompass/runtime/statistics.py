"""The estimators behind ``summary.json``: clustered standard errors, pass@k and pass^k.

* **Clustered standard error** of a mean over all trials (Miller, "Adding Error Bars to Evals", 2024): trials
  of one task are not independent, so the task is the cluster. For values ``x[c][i]`` (cluster ``c``, trial
  ``i``), ``n`` values in all, ``C`` clusters and mean ``m``::

      SE = sqrt( C / (C - 1) * sum_c ( sum_i (x[c][i] - m) )^2 ) / n

  With one trial per task this is the ordinary standard error of the mean, ``sqrt(s^2 / n)`` with the sample
  variance ``s^2``; with several, it grows with how alike a task's trials are. The 95% confidence interval is
  ``m ± 1.96 · SE`` (normal approximation; ``None`` with fewer than two tasks).
* **pass@k** (Chen et al., 2021): the chance that at least one of ``k`` trials drawn from a task's ``n``
  succeeds, ``1 - C(n - c, k) / C(n, k)`` for ``c`` successes, averaged over tasks.
* **pass^k** (Yao et al., 2024, tau-bench): the chance that all ``k`` drawn trials succeed,
  ``C(c, k) / C(n, k)``, averaged over tasks.

Both are computed for ``k = 1 .. n`` over the tasks that have at least ``k`` trials; an errored trial counts as
a failure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

#: The normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


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
    if mean is None or stderr is None:
        return None
    return (mean - z * stderr, mean + z * stderr)


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
