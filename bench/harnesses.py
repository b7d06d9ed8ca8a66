"""Figures for the agent harnesses and the ``harbor`` benchmark under ``docker``, on this machine's engine.

1. ``react``, one task doing ``--calls`` (50) ``bash`` calls, then ``submit``: the wall time per call and the
   environment's share of it (the time inside ``env.exec`` over the run phase's time; the model is an
   in-process scripted one answering at once, so the rest is the harness and the runtime). Beside it, the same
   commands through the bare docker CLI (``docker exec CONTAINER sh -c ...`` on a started container) and the
   ``local`` environment.
2. A ``--tasks`` (20) task Harbor directory (each: ``environment/Dockerfile`` ``FROM python:3.11-slim``, a
   one-line ``solve.sh``, a ``test.sh`` writing ``reward.txt``) under ``oracle`` in ``docker``: seconds per task
   (median of the attempts' totals, and the run's wall time over the tasks) against a plain
   ``docker run --rm`` of the same image doing the same work (solve, test, read the reward) per task; at
   concurrency 1 and ``--concurrency`` (4). The phase medians show where an attempt's time goes.

Figures are printed, not asserted. Usage: uv run python bench/harnesses.py [--calls 50] [--tasks 20]
[--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

from agentcompass.runtime import BaseBenchmark, TaskSpec, TaskStatus
from agentcompass.testing import ScriptedModel, run_benchmark, tool_call

IMAGE = "python:3.11-slim"


class Calls(BaseBenchmark):
    """One task with an instruction; nothing to score."""

    name = "bench-calls"

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        return [TaskSpec(task_id="calls", data={"instruction": "Run the commands, then submit."})]

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        return replace(result, metrics={"score": 1.0 if result.status is TaskStatus.COMPLETED else 0.0})


def calls_model(n: int) -> ScriptedModel:
    def responder(request: dict[str, Any]) -> dict[str, Any]:
        turn = sum(1 for m in request["messages"] if m.get("role") == "assistant")
        if turn < n:
            return tool_call("bash", f"call_{turn}", command=f"echo call {turn}; ls /usr >/dev/null")
        return tool_call("submit", "call_end", answer="done")

    return ScriptedModel(responder)


async def react_figures(n: int, environment: str) -> dict[str, float]:
    run = await run_benchmark(Calls, "react", calls_model(n), environment=environment,
                              harness_args={"max_turns": str(n + 5)})
    result = run.result("calls")
    assert result.status is TaskStatus.COMPLETED, result.error
    record = result.artifacts["react"]
    run_s = result.timings["run"]
    model_s = sum(c["latency_s"] for c in run.trajectories)
    return {
        "turns": record["turns"],
        "per_call_ms": 1000 * run_s / record["turns"],
        "env_per_call_ms": 1000 * record["bash_seconds"] / record["bash_calls"],
        "env_share": record["bash_seconds"] / run_s,
        "model_share": model_s / run_s,
    }


def bare_docker_exec(n: int) -> float:
    """Milliseconds per ``docker exec`` of the same command on a started container."""
    name = f"bench-harnesses-{time.monotonic_ns()}"
    subprocess.run(["docker", "run", "-d", "--rm", "--network", "none", "--name", name, IMAGE, "sleep", "600"],
                   check=True, capture_output=True)
    try:
        start = time.perf_counter()
        for i in range(n):
            subprocess.run(["docker", "exec", name, "sh", "-c", f"echo call {i}; ls /usr >/dev/null"],
                           check=True, capture_output=True)
        return 1000 * (time.perf_counter() - start) / n
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


# -- harbor ----------------------------------------------------------------------------------------------

TEST_SH = """#!/bin/bash
if [ "$(cat /app/out.txt 2>/dev/null)" = "{value}" ]; then echo 1 > /logs/verifier/reward.txt; \
else echo 0 > /logs/verifier/reward.txt; fi
"""


def harbor_tasks(root: Path, n: int) -> Path:
    for i in range(n):
        task = root / f"task-{i:02d}"
        for sub in ("environment", "tests", "solution"):
            (task / sub).mkdir(parents=True, exist_ok=True)
        (task / "instruction.md").write_text(f"Write {i} into /app/out.txt.\n")
        (task / "task.toml").write_text('version = "1.0"\n[metadata]\ndifficulty = "easy"\n'
                                        '[environment]\nnetwork_mode = "no-network"\n')
        (task / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\nWORKDIR /app\n")
        (task / "tests" / "test.sh").write_text(TEST_SH.replace("{value}", str(i)))
        (task / "solution" / "solve.sh").write_text(f"#!/bin/bash\necho {i} > /app/out.txt\n")
    return root


def plain_docker_run(task: Path, image: str) -> float:
    script = ("mkdir -p /logs/verifier /app && cd /app && bash /solution/solve.sh && bash /tests/test.sh && "
              "cat /logs/verifier/reward.txt")
    start = time.perf_counter()
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{task / 'solution'}:/solution:ro",
                           "-v", f"{task / 'tests'}:/tests:ro", image, "sh", "-c", script],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "1", done
    return time.perf_counter() - start


async def harbor_figures(root: Path, concurrency: int) -> dict[str, Any]:
    start = time.perf_counter()
    run = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                              concurrency=concurrency)
    wall = time.perf_counter() - start
    assert run.summary["status_counts"] == {"COMPLETED": len(run.results)}, run.summary["status_counts"]
    assert all(r.metrics["reward"] == 1.0 for r in run.results)
    totals = [r.timings["total"] for r in run.results]
    phases = {p: median(r.timings[p] for r in run.results) for p in ("prepare", "run", "collect",
                                                                                "evaluate")}
    built = [e for e in run.jsonl("logs.jsonl") if e.get("event") in ("docker.image_built", "docker.image_reused")]
    return {"median": median(totals), "wall_per_task": wall / len(run.results), "wall": wall,
            "phases": phases, "image": built[-1]["image"] if built else IMAGE}


def plain_figures(root: Path, image: str, concurrency: int) -> dict[str, float]:
    tasks = sorted(p for p in root.iterdir() if p.is_dir())
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        times = list(pool.map(lambda t: plain_docker_run(t, image), tasks))
    wall = time.perf_counter() - start
    return {"median": median(times), "wall_per_task": wall / len(tasks)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()

    print(f"react: one task, {args.calls} bash calls (in-process scripted model)")
    print(f"{'environment':<12} {'ms/call':>8} {'env ms/call':>12} {'env share':>10} {'model share':>12}")
    for environment in ("docker", "local"):
        f = await react_figures(args.calls, environment)
        print(f"{environment:<12} {f['per_call_ms']:>8.1f} {f['env_per_call_ms']:>12.1f} {f['env_share']:>10.1%} "
              f"{f['model_share']:>12.1%}")
    print(f"{'docker exec':<12} {bare_docker_exec(args.calls):>8.1f}   (the bare CLI, same command, no harness)")

    with tempfile.TemporaryDirectory(prefix="bench-harbor-") as scratch:
        root = harbor_tasks(Path(scratch) / "tasks", args.tasks)
        await harbor_figures(root, args.concurrency)  # warm-up: builds the image (cached by content hash)
        print(f"\nharbor: {args.tasks} tasks under oracle in docker, against plain `docker run --rm` per task")
        print(f"{'concurrency':<12} {'agentcompass s/task':>20} {'plain s/task':>13} {'ratio':>6}   "
              f"{'agentcompass wall/task':>22} {'plain wall/task':>16} {'ratio':>6}")
        for concurrency in dict.fromkeys((1, args.concurrency)):
            ours = await harbor_figures(root, concurrency)
            plain = plain_figures(root, ours["image"], concurrency)
            print(f"{concurrency:<12} {ours['median']:>20.3f} {plain['median']:>13.3f} "
                  f"{ours['median'] / plain['median']:>6.2f}   {ours['wall_per_task']:>22.3f} "
                  f"{plain['wall_per_task']:>16.3f} {ours['wall_per_task'] / plain['wall_per_task']:>6.2f}")
            print("             phases (median s): " + ", ".join(f"{k} {v:.3f}" for k, v in ours["phases"].items()))


if __name__ == "__main__":
    asyncio.run(main())
