"""Cold start of a Harbor run on ``docker``: how soon tasks start when their images must be built first.

Writes ``--tasks`` Harbor task directories (task.toml, instruction.md, environment/Dockerfile FROM
python:3.11-slim, solution/solve.sh, tests/test.sh) whose builds cost different amounts of CPU (task ``i``
burns ``(i % 3 + 1) * --build-work`` seconds of CPU in a ``RUN`` step; fresh content each round, so nothing is
cached), then runs ``harbor`` with the ``oracle`` harness at ``--concurrency`` through the library API, as
``agentcompass run harbor oracle mock -b path=... --env docker -c N`` does. A second, warm run of the same
tasks follows (every image reused).

Prints per round and run (cold, warm): seconds from the call to the first task running (its environment
open and prepared: the first ``task.phase`` → ``RUNNING``), to the median and last task running, the run's
total, and for the cold run when the first image was built. Figures are printed, not asserted. The images it
built are removed at the end.

Usage: uv run python bench/harbor_cold_start.py [--tasks 6] [--concurrency 6] [--build-work 3] [--rounds 2]
       [--env-arg builds=2 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

from agentcompass.testing import run_benchmark

BURN = "python3 -c \"import time; t=time.process_time(); exec('while time.process_time()-t<{seconds}: pass')\""


def write_tasks(root: Path, n: int, work: float) -> None:
    nonce = secrets.token_hex(6)
    for i in range(n):
        task = root / f"task-{i:02d}"
        for sub in ("environment", "solution", "tests"):
            (task / sub).mkdir(parents=True)
        (task / "instruction.md").write_text(f"Write {i} into /app/answer.txt.\n")
        (task / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n'
                                        '[agent]\ntimeout_sec = 60.0\n[environment]\nnetwork_mode = "no-network"\n')
        burn = BURN.format(seconds=(i % 3 + 1) * work)
        (task / "environment" / "Dockerfile").write_text(
            f"FROM python:3.11-slim\nRUN echo {nonce}-{i} && {burn}\nWORKDIR /app\n")
        (task / "solution" / "solve.sh").write_text(f"#!/bin/bash\necho {i} > /app/answer.txt\n")
        (task / "tests" / "test.sh").write_text(
            f'#!/bin/bash\n[ "$(cat /app/answer.txt)" = "{i}" ] && echo 1 > /logs/verifier/reward.txt '
            "|| echo 0 > /logs/verifier/reward.txt\n")


def _seconds(stamp: str, since: float) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - since


async def one_run(root: Path, run_dir: Path, concurrency: int, env_args: dict[str, str]) -> dict[str, float]:
    started = time.time()
    run = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                              environment_args=env_args, concurrency=concurrency, run_dir=run_dir)
    total = time.time() - started
    rewards = [r.metrics.get("reward") for r in run.results]
    if rewards.count(1.0) != len(rewards):
        raise SystemExit(f"not every reward is 1: {[(r.task_id, r.status.value, r.error) for r in run.results]}")
    logs = run.jsonl("logs.jsonl")
    running = sorted(_seconds(e["timestamp"], started) for e in logs
                     if e.get("event") == "task.phase" and e.get("phase") == "RUNNING")
    built = sorted(_seconds(e["timestamp"], started) for e in logs if e.get("event") == "docker.image_built")
    images = {str(e.get("image")) for e in logs if e.get("event") in ("docker.image_built", "docker.image_reused")}
    return {"first_task": running[0], "median_task": statistics.median(running), "last_task": running[-1],
            "total": total, "first_image": built[0] if built else float("nan"), "built": len(built),
            "images": images}  # type: ignore[dict-item]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--build-work", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--env-arg", action="append", default=[], help="key=value for the docker environment")
    args = parser.parse_args()
    env_args = dict(item.split("=", 1) for item in args.env_arg)
    images: set[str] = set()
    print(f"{args.tasks} tasks, concurrency {args.concurrency}, builds of {args.build_work:g}-"
          f"{3 * args.build_work:g} s CPU, env args {env_args or 'none'}")
    print(f"{'round':>5} {'run':>5} {'first task':>10} {'median':>8} {'last':>8} {'total':>8} "
          f"{'1st image':>9} {'built':>5}")
    try:
        for n in range(1, args.rounds + 1):
            with tempfile.TemporaryDirectory(prefix="agentcompass-bench-harbor-") as scratch:
                root = Path(scratch) / "tasks"
                write_tasks(root, args.tasks, args.build_work)
                for kind in ("cold", "warm"):
                    figures = await one_run(root, Path(scratch) / kind, args.concurrency, env_args)
                    images |= figures.pop("images")  # type: ignore[arg-type]
                    print(f"{n:>5} {kind:>5} {figures['first_task']:>10.1f} {figures['median_task']:>8.1f} "
                          f"{figures['last_task']:>8.1f} {figures['total']:>8.1f} {figures['first_image']:>9.1f} "
                          f"{int(figures['built']):>5}")
    finally:
        for image in sorted(images):
            await asyncio.to_thread(subprocess.run, ["docker", "image", "rm", "-f", image], capture_output=True,
                                    timeout=120)
    print(json.dumps({"removed_images": len(images)}))


if __name__ == "__main__":
    asyncio.run(main())
