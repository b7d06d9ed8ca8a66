"""Per-instance overhead of the ``swebench`` benchmark under ``docker``, beyond the eval script's own time.

``--instances`` (8) copies of the local Python instance of ``tests/swebench/instances.py`` (a small repository in
``/testbed``, an eval script in the official form graded by ``parse_log_pytest``; its image is built once and
cached by tag), run under ``oracle``:

* **agentcompass**: ``run swebench oracle`` through the library's runner at concurrency 1 and ``--concurrency``
  (4). Per attempt: environment start and ``prepare_task`` (``prepare``), applying the gold patch (``run``),
  collecting ``model.patch`` (``collect``), and the fresh evaluation (``evaluate``: a second container, the patch
  applied as the official harness applies it, the eval script, grading) of which the eval script itself is
  ``eval_script``. Overhead = attempt total - eval_script.
* **plain docker run**: per instance ``docker run --rm IMAGE`` applying the same patch with ``git apply`` and
  running the same eval script, its output graded by ``swebench.harness.grading`` in this process. Overhead =
  wall time - the eval script's time measured inside the container.

Figures are printed (medians over the instances), not asserted. Usage:
uv run python bench/swebench_overhead.py [--instances 8] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median
from typing import Any

from agentcompass.testing import run_benchmark

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.swebench.instances import suite  # noqa: E402


def plain_run(row: dict[str, Any], work: Path) -> tuple[float, float, bool]:
    """(wall seconds, eval-script seconds, resolved) of one instance by plain ``docker run``."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    spec = make_test_spec(row)
    folder = work / row["instance_id"]
    folder.mkdir()
    (folder / "patch.diff").write_text(row["patch"])
    (folder / "eval.sh").write_text(spec.eval_script)
    script = ("git apply --verbose /work/patch.diff >/dev/null 2>&1; s=$(date +%s.%N); /bin/bash /work/eval.sh "
              "> /work/out.txt 2>&1; e=$(date +%s.%N); echo \"$s $e\"")
    started = time.perf_counter()
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{folder}:/work", "-w", "/testbed",
                           row["image"], "bash", "-c", script], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    begin, end = (float(x) for x in done.stdout.split())
    report = get_eval_report(spec, {"instance_id": row["instance_id"], "model_patch": row["patch"],
                                    "model_name_or_path": "plain"}, str(folder / "out.txt"), True)
    return wall, end - begin, bool(report[row["instance_id"]]["resolved"])


def figures(label: str, rows: list[dict[str, float]], wall: float, n: int) -> None:
    keys = ("prepare", "run", "collect", "evaluate", "eval_script", "total")
    med = {k: median(r.get(k, 0.0) for r in rows) for k in keys}
    overhead = median(r["total"] - r.get("eval_script", 0.0) for r in rows)
    print(f"{label:<28} " + "  ".join(f"{k}={med[k]:.2f}" for k in keys)
          + f"  overhead={overhead:.2f}  wall/instance={wall / n:.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-swebench-") as tmp:
        root = Path(tmp)
        local = suite(root / "suite", go=False, build=True)
        base = local.rows["acme__calc-1"]
        rows = [{**base, "instance_id": f"acme__calc-{i}"} for i in range(1, args.instances + 1)]
        dataset = root / "dataset.jsonl"
        dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"{args.instances} instances of acme/calc (image {base['image']}), oracle, medians in seconds\n")

        for concurrency in (1, args.concurrency):
            work = root / f"plain-{concurrency}"
            work.mkdir()
            started = time.perf_counter()
            with ThreadPoolExecutor(concurrency) as pool:
                plain = list(pool.map(plain_run, rows, [work] * len(rows)))
            wall = time.perf_counter() - started
            assert all(resolved for _, _, resolved in plain)
            med_wall, med_eval = median(p[0] for p in plain), median(p[1] for p in plain)
            print(f"{'plain docker run, c=' + str(concurrency):<28} wall={med_wall:.2f}  eval_script={med_eval:.2f}  "
                  f"overhead={median(p[0] - p[1] for p in plain):.2f}  wall/instance={wall / len(rows):.2f}")

            started = time.perf_counter()
            run = await run_benchmark("swebench", "oracle", environment="docker", run_dir=root / f"run-{concurrency}",
                                      benchmark_args={"dataset": str(dataset)}, concurrency=concurrency)
            wall = time.perf_counter() - started
            assert all(v == 1.0 for v in run.metric().values()), run.metric()
            figures(f"agentcompass, c={concurrency}", [dict(r.timings) for r in run.results], wall, len(rows))
            print()


if __name__ == "__main__":
    asyncio.run(main())
