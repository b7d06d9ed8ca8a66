"""Suites: a grid in one process against the same runs one after another, and the leaderboard of a big suite.

1. **A 20-cell suite of small runs** (``agentcompass suite run``: 10 cells of example_interactive / none and 10 of
   example_coding / react, the mock model with 0.05 s per call and error rates 0-0.45, 4 tasks each) against the
   same 20 runs launched one after another as separate ``agentcompass run`` processes (the shell loop a suite
   replaces). Wall time of each, and that both produced the same number of results. Target: the suite is faster.
2. **The leaderboard of 100 cells x 1,000 tasks**: synthetic finished run directories (written through the core's
   own writer, as bench/report.py does; 2 benchmarks, 2% errors), then ``suite show --json``'s function
   (:func:`agentcompass.runtime.run_reader.leaderboard`, paired differences included) and the report plugin's
   leaderboard page, written. Target: <= 2 s.

Each measurement is repeated (``--repeat``) and printed as a range: the machine is shared.

Usage: uv run python bench/suite.py [--cells 20] [--repeat 2] [--board-cells 100] [--board-tasks 1000]
                                    [--skip-grid] [--skip-board]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLI = [sys.executable, "-m", "agentcompass.cli.main"]


def cells(n: int) -> list[dict[str, object]]:
    out = []
    for i in range(n):
        bench, harness = ("example_interactive", "none") if i % 2 == 0 else ("example_coding", "react")
        out.append({"name": f"c{i:02d}", "benchmark": bench, "harness": harness, "model": "mock",
                    "model_args": {"latency": "0.05", "error_rate": f"{(i // 2) * 0.05:.2f}"},
                    "limit": 4, "seed": 100 + i})
    return out


def suite_toml(grid: list[dict[str, object]], concurrency: int) -> str:
    lines = [f"[defaults]\nconcurrency = {concurrency}\n"]
    for cell in grid:
        lines.append("[[run]]")
        for key, value in cell.items():
            if isinstance(value, dict):
                inner = ", ".join(f'{k} = "{v}"' for k, v in value.items())
                lines.append(f"{key} = {{ {inner} }}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    return "\n".join(lines)


def run_argv(cell: dict[str, object], out: Path, concurrency: int) -> list[str]:
    argv = [*CLI, "run", str(cell["benchmark"]), str(cell["harness"]), str(cell["model"]), "-o", str(out),
            "-n", str(cell["limit"]), "--seed", str(cell["seed"]), "-c", str(concurrency)]
    for k, v in dict(cell["model_args"]).items():  # type: ignore[call-overload]
        argv += ["-m", f"{k}={v}"]
    return argv


def count_results(root: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in root.glob("*/results.jsonl"))


def grid_bench(n: int, concurrency: int, work: Path) -> tuple[float, float, int, int]:
    grid = cells(n)
    (work / "suite.toml").write_text(suite_toml(grid, concurrency))
    started = time.perf_counter()
    done = subprocess.run([*CLI, "suite", "run", str(work / "suite.toml"), "-o", str(work / "suite")],
                          capture_output=True, text=True, cwd=work)
    suite_s = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"suite run failed ({done.returncode}): {done.stderr[-2000:]}")
    seq = work / "sequential"
    seq.mkdir()
    started = time.perf_counter()
    for cell in grid:
        one = subprocess.run(run_argv(cell, seq / str(cell["name"]), concurrency), capture_output=True, text=True,
                             cwd=work)
        if one.returncode not in (0, 1):
            raise SystemExit(f"run failed ({one.returncode}): {one.stderr[-2000:]}")
    sequential_s = time.perf_counter() - started
    return suite_s, sequential_s, count_results(work / "suite"), count_results(seq)


def make_board(root: Path, n_cells: int, n_tasks: int) -> Path:
    """A finished suite directory of ``n_cells`` synthetic runs of ``n_tasks`` tasks each (2 benchmarks)."""
    from agentcompass.results.run_dir import RunDirectory
    from agentcompass.results.summary import build_run_info, build_summary, contract_json
    from agentcompass.runtime import RunRequest, RunResult, TaskSpec, TaskStatus
    from agentcompass.runtime.metrics import make_metric_contract
    from agentcompass.runtime.model_providers import Redactor
    from agentcompass.runtime.records import RunPlan
    from agentcompass.suites.cell_state import FINISHED, CellState, SuiteDirectory
    from agentcompass.suites.suite_file import Cell, SuitePlan

    contract = make_metric_contract("reward", scalar=("reward",), labels={"reward": "Reward"}, binary=True)
    directory = SuiteDirectory(root)
    plan_cells = []
    for c in range(n_cells):
        bench = f"bench{c % 2}"
        name = f"{bench}-cell{c:03d}"
        plan_cells.append(Cell(name, {"benchmark": bench, "harness": "none", "model": f"mock{c}"}, "run"))
    directory.create(SuitePlan("bench.toml", tuple(plan_cells)), [])
    for c, cell in enumerate(plan_cells):
        rng = random.Random(c)
        path = directory.cell_dir(cell.name)
        bench = str(cell.options["benchmark"])
        req = RunRequest(benchmark=bench, harness="none", model=f"mock{c}", run_id=cell.name).with_options(seed=c)
        store = RunDirectory.create(path, Redactor())
        final = {}
        skill = 0.3 + 0.4 * rng.random()
        for t in range(n_tasks):
            task = f"task-{t:05d}"
            if rng.random() < 0.02:
                result = RunResult(task_id=task, category="all", status=TaskStatus.RUN_ERROR, error="timed out",
                                   error_phase="run")
            else:
                result = RunResult(task_id=task, category="all", metrics={"reward": float(rng.random() < skill)},
                                   usage={"models": {"agent": {"calls": 3, "prompt_tokens": 900,
                                                               "completion_tokens": 60, "latency_s": 1.0,
                                                               "errors": 0, "cost_usd": 0.001}}})
            store.append_result(result)
            final[(task, 1)] = result
        plan = RunPlan("Synthetic", None, "LocalProvider", "local", "reuse", contract_json(contract),
                       {"agent": req.model})
        store.write_run_info(build_run_info(req, plan, {"builtin": "0.1.0"}, None, time.time()))
        work = [(TaskSpec(task_id=k[0], category="all"), 1) for k in final]
        store.write_summary(build_summary(req, contract, work, final, interrupted=False, stopped_reason=None,
                                          duration_s=600.0, run_dir=str(path)), final)
        store.close()
        directory.write_state(cell.name, CellState(FINISHED, 0, None, 0, time.time()))
    return root


def board_bench(root: Path) -> tuple[float, float, int]:
    from agentcompass.runtime.model_providers import Redactor
    from agentcompass.runtime.run_reader import leaderboard
    from agentcompass_report.leaderboard import leaderboard_page

    started = time.perf_counter()
    data = leaderboard(root)
    show_s = time.perf_counter() - started
    started = time.perf_counter()
    page, _ = leaderboard_page(root, Redactor())
    (root / "report.html").write_text(page, encoding="utf-8")
    page_s = time.perf_counter() - started
    with_diff = sum(1 for b in data["benchmarks"] for c in b["cells"] if c["difference"])
    return show_s, page_s, with_diff


def _range(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} s" if len(values) > 1 else f"{values[0]:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--board-cells", type=int, default=100)
    parser.add_argument("--board-tasks", type=int, default=1000)
    parser.add_argument("--skip-grid", action="store_true")
    parser.add_argument("--skip-board", action="store_true")
    args = parser.parse_args()
    if not args.skip_grid:
        suite_times, seq_times = [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="agentcompass-bench-suite-") as tmp:
                suite_s, seq_s, n_suite, n_seq = grid_bench(args.cells, args.concurrency, Path(tmp))
            assert n_suite == n_seq, (n_suite, n_seq)
            suite_times.append(suite_s)
            seq_times.append(seq_s)
        print(f"{args.cells}-cell suite of small runs ({n_suite} results, concurrency {args.concurrency}):")
        print(f"  agentcompass suite run (one process):        {_range(suite_times)}")
        print(f"  {args.cells} x agentcompass run, one after another: {_range(seq_times)}")
        print(f"  speed-up: {min(seq_times) / min(suite_times):.1f}x (best of each; target: faster)")
    if not args.skip_board:
        with tempfile.TemporaryDirectory(prefix="agentcompass-bench-board-") as tmp:
            started = time.perf_counter()
            root = make_board(Path(tmp) / "suite", args.board_cells, args.board_tasks)
            made = time.perf_counter() - started
            shows, pages = [], []
            for _ in range(args.repeat):
                show_s, page_s, with_diff = board_bench(root)
                shows.append(show_s)
                pages.append(page_s)
            size = (root / "report.html").stat().st_size
        print(f"leaderboard of {args.board_cells} cells x {args.board_tasks} tasks (made in {made:.1f} s; "
              f"{with_diff} paired differences):")
        print(f"  suite show --json (library):   {_range(shows)}")
        print(f"  leaderboard page written:      {_range(pages)} ({size / 1e3:.0f} kB; target <= 2 s)")


if __name__ == "__main__":
    main()
