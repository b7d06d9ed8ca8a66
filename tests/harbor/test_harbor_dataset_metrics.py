"""A dataset's declared metric (Harbor's ``harbor.metrics``): ``mean`` is the summary's mean; ``sum``, ``min`` and
``max`` are computed over every trial, a trial without a reward counting 0, and shown in the summary — checked
against Harbor's own metric classes on random inputs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.runtime.metrics import aggregate_group, make_metric_contract
from agentcompass.testing import run_benchmark
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.harbor.taskdirs import REWARD_BY_EXIT, write_task

HARBOR_VENV = Path.home() / ".cache" / "agentcompass-tests" / "harbor-0.25.0-venv"
DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\n"


def registry_with(tmp_path: Path, metrics: list[dict[str, Any]]) -> Path:
    """A registry of one dataset of local tasks: ``good`` (the oracle solves it) and ``bad`` (its solution is
    wrong), declaring ``metrics``."""
    root = tmp_path / "tasks"
    write_task(root, "good", instruction="Write `x` to /app/x.txt.", test="grep -qx x /app/x.txt\n" + REWARD_BY_EXIT,
               solve="echo x > /app/x.txt\n", dockerfile=DOCKERFILE)
    write_task(root, "bad", instruction="Write `x` to /app/x.txt.", test="grep -qx x /app/x.txt\n" + REWARD_BY_EXIT,
               solve="echo y > /app/x.txt\n", dockerfile=DOCKERFILE)
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps([{"name": "scored", "version": "1", "description": "", "metrics": metrics,
                                     "tasks": [{"name": n, "path": str(root / n)} for n in ("good", "bad")]}]))
    return registry


async def test_a_datasets_sum_and_max_are_in_the_summary(tmp_path: Path) -> None:
    registry = registry_with(tmp_path, [{"type": "sum"}, {"type": "max"}])
    run = await run_benchmark("harbor", "oracle", benchmark_args={"dataset": "scored", "registry": str(registry)},
                              run_dir=tmp_path / "run", trials=2)
    reward = run.summary["metrics"]["overall"]["reward"]
    assert reward["mean"] == 0.5
    assert reward["aggregates"] == {"sum": 2.0, "max": 1.0}  # over the 4 trials: good twice, bad twice


async def test_mean_alone_adds_no_figure_and_uv_script_is_said_not_computed(tmp_path: Path) -> None:
    run = await run_benchmark("harbor", "oracle",
                              benchmark_args={"dataset": "scored",
                                              "registry": str(registry_with(tmp_path, [{"type": "mean"}]))},
                              run_dir=tmp_path / "run")
    assert run.summary["metrics"]["overall"]["reward"]["aggregates"] == {}
    from agentcompass_harbor.benchmark import HarborBenchmark

    script = registry_with(tmp_path / "other", [{"type": "uv-script", "kwargs": {"script_path": "m.py"}},
                                                {"type": "min"}])
    bench = HarborBenchmark(dataset="scored", registry=str(script))
    assert bench.dataset_metrics["honoured"] == ["min"]
    assert bench.metric_contract.aggregates == ("min",)


# -- Harbor's own metric classes, on the same rewards -----------------------------------------------------------

HARBOR_METRICS = """
import json, sys
from harbor.metrics.max import Max
from harbor.metrics.mean import Mean
from harbor.metrics.min import Min
from harbor.metrics.sum import Sum
print(json.dumps([{name: cls().compute(rewards) for name, cls in
                   (("mean", Mean), ("sum", Sum), ("min", Min), ("max", Max))}
                  for rewards in json.loads(sys.stdin.read())]))
"""

KEYS = ("reward", "accuracy")
REWARD = st.one_of(st.none(), st.fixed_dictionaries({"reward": st.sampled_from([0.0, 0.25, 0.5, 1.0])}),
                   st.dictionaries(st.sampled_from(KEYS), st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=1))
def ours(rewards: list[dict[str, float] | None]) -> dict[str, dict[str, float]]:
    """Our summary's figures of each key over these trials' rewards (``None``: a trial without a reward)."""
    contract = make_metric_contract(primary="reward", scalar=KEYS, binary=True, aggregates=("sum", "min", "max"))
    results = [RunResult(task_id=f"t{i}", status=TaskStatus.COMPLETED, metrics=r) if r is not None else
               RunResult(task_id=f"t{i}", status=TaskStatus.RUN_ERROR, error="no reward")
               for i, r in enumerate(rewards)]
    group = aggregate_group(contract, results)
    return {key: {"mean": group.metrics[key].mean or 0.0, **group.metrics[key].aggregates} for key in KEYS}


@pytest.mark.slow
def test_our_figures_are_harbors_metrics_on_random_rewards() -> None:
    """Rewards hypothesis draws, through Harbor's ``Mean``, ``Sum``, ``Min`` and ``Max`` (in one child process,
    its Python 3.12 environment) and through our summary's aggregation: the same figures."""
    python = HARBOR_VENV / "bin" / "python"
    if not python.exists():
        if os.environ.get("CI"):
            pytest.fail(f"no harbor test environment at {HARBOR_VENV} (tests/export/test_atif_export.py makes it)")
        pytest.skip(f"no harbor test environment at {HARBOR_VENV}")
    cases: list[list[dict[str, float] | None]] = []

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(st.lists(REWARD, min_size=1, max_size=8))
    def draw(rewards: list[dict[str, float] | None]) -> None:
        cases.append(rewards)

    draw()
    done = subprocess.run([str(python), "-c", HARBOR_METRICS], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for rewards, harbor in zip(cases, json.loads(done.stdout), strict=True):
        mine = ours(rewards)
        keys = {k for r in rewards if r for k in r}
        for kind, figures in harbor.items():
            if len(keys) <= 1:  # one key: Harbor names the figure after the metric, from each trial's only value
                key = next(iter(keys), "reward")
                assert mine[key][kind] == pytest.approx(figures[kind]), (rewards, kind)
            else:
                for key, value in figures.items():
                    assert mine[key][kind] == pytest.approx(value), (rewards, kind, key)
