"""Aggregation and comparison at scale: 10,000 tasks x 10 trials of synthetic results, through the real code.

Prints, each measured in its own child process (so peak RSS is that step's alone, imports included):
  * building ``summary.json``'s metrics (means, clustered standard errors, CIs, pass@k and pass^k for
    k = 1..10, per category) from 100,000 results;
  * ``agentcompass results compare`` of two such run directories (reading their ``scores.json`` index, as a
    finished run has, then the paired differences), through the CLI's own functions; and the same with the
    index removed (reading and validating each whole ``results.jsonl``: a run cut short, or a resumed one).
Targets: each ≤ 1 s and ≤ 200 MB.

Usage: uv run python bench/aggregation.py [--tasks 10000] [--trials 10]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentcompass.results.run_dir import RunDirectory
from agentcompass.results.scores import write_scores
from agentcompass.results.summary import build_run_info, build_summary, contract_json
from agentcompass.runtime import RunRequest, RunResult, TaskSpec, TaskStatus
from agentcompass.runtime.metrics import make_metric_contract
from agentcompass.runtime.records import RunPlan

CONTRACT = make_metric_contract("reward", scalar=("reward", "partial"), binary=True)


def synthetic(tasks: int, trials: int, skill: float, seed: int) -> list[RunResult]:
    rng = random.Random(seed)
    out = []
    for t in range(tasks):
        difficulty = rng.random()
        for trial in range(1, trials + 1):
            if rng.random() < 0.02:
                out.append(RunResult(task_id=f"task-{t}", category=f"c{t % 7}", status=TaskStatus.RUN_ERROR,
                                     trial=trial, error="boom"))
                continue
            reward = 1.0 if rng.random() < skill * (1 - difficulty) + 0.1 else 0.0
            out.append(RunResult(task_id=f"task-{t}", category=f"c{t % 7}", trial=trial,
                                 metrics={"reward": reward, "partial": rng.random()}))
    return out


def write_run(path: Path, results: list[RunResult], trials: int) -> None:
    req = RunRequest(benchmark="synthetic", harness="none", model="mock", run_id=path.name).with_options(trials=trials)
    store = RunDirectory.create(path)
    for r in results:
        store.append_result(r)
    plan = RunPlan("Synthetic", None, "Local", "local", "none", contract_json(CONTRACT), {})
    store.write_run_info(build_run_info(req, plan, {}, None, time.time()))
    store.close()
    write_scores(path, {(r.task_id, r.trial): r for r in results}, path / "results.jsonl")  # as a run's end does


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_aggregate(tasks: int, trials: int) -> None:
    results = synthetic(tasks, trials, 0.6, 1)
    work = [(TaskSpec(task_id=f"task-{t}"), trial) for t in range(tasks) for trial in range(1, trials + 1)]
    final = {(r.task_id, r.trial): r for r in results}
    req = RunRequest(benchmark="synthetic", harness="none", model="mock").with_options(trials=trials)
    started = time.perf_counter()
    summary = build_summary(req, CONTRACT, work, final, interrupted=False, stopped_reason=None, duration_s=0,
                            run_dir="")
    elapsed = time.perf_counter() - started
    assert len(summary.metrics.pass_k) == trials and summary.n_finished == tasks * trials
    print(json.dumps({"seconds": elapsed, "peak_mb": peak_mb()}))


def child_compare(a: str, b: str) -> None:
    from agentcompass.results.comparison import compare, load_run

    started = time.perf_counter()
    comparison = compare(load_run(Path(a)), load_run(Path(b)), by_category=True)
    elapsed = time.perf_counter() - started
    assert comparison.n_shared_tasks > 0
    print(json.dumps({"seconds": elapsed, "peak_mb": peak_mb()}))


def in_child(*args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        child_aggregate(int(rest[0]), int(rest[1])) if kind == "aggregate" else child_compare(*rest)
        return
    n = args.tasks * args.trials
    print(f"agentcompass statistics — {args.tasks} tasks × {args.trials} trials = {n} results")
    agg = in_child("--child", "aggregate", str(args.tasks), str(args.trials))
    print(f"  summary metrics (means, clustered SE/CI, pass@k/pass^k, per category): {agg['seconds']:.2f} s, "
          f"peak RSS {agg['peak_mb']:.0f} MB  (targets ≤ 1 s, ≤ 200 MB)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, skill, seed in (("a", 0.5, 2), ("b", 0.6, 3)):
            write_run(Path(tmp) / name, synthetic(args.tasks, args.trials, skill, seed), args.trials)
        cmp = in_child("--child", "compare", str(Path(tmp) / "a"), str(Path(tmp) / "b"))
        print(f"  results compare of two finished runs (scores.json, pair, per category): {cmp['seconds']:.2f} s, "
              f"peak RSS {cmp['peak_mb']:.0f} MB  (targets ≤ 1 s, ≤ 200 MB)")
        for name in ("a", "b"):
            (Path(tmp) / name / "scores.json").unlink()
        raw = in_child("--child", "compare", str(Path(tmp) / "a"), str(Path(tmp) / "b"))
    print(f"  results compare without the index (whole results.jsonl read and validated): {raw['seconds']:.2f} s, "
          f"peak RSS {raw['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
