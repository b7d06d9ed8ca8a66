"""Scanning a synthetic 10,000-attempt run with every built-in scanner but the judge: seconds and peak memory
(targets: at most 10 s and 300 MB). The CPU seconds are printed too: on a busy machine they are the steadier number.

    uv run python bench/scan.py [N_ATTEMPTS]

The run is made from a real one (a scripted ``react`` agent on the sample ``hello-file`` Harbor task): its
``run.json`` and record, and a conversation of 6 model calls with bash tool calls, repeated for each attempt
(one in ten reads the tests, so the scanners write findings too).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from agentcompass.plugins import load_plugins
from agentcompass.scanning.engine import build_scanners, scan_run


def conversation(task: str, cheat: bool) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": "You are an agent. " * 40},
                            {"role": "user", "content": f"Solve {task}. " * 20}]
    calls = []
    for i in range(6):
        command = "cat tests/test.sh" if cheat and i == 2 else f"ls -la step{i} && python3 -c 'print({i})'"
        reply = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash",
                                                            "arguments": json.dumps({"command": command})}}]}
        calls.append({"task_id": task, "trial": 1, "attempt": 1, "index": i, "role": "agent", "model": "m",
                      "started_at": 0.0, "latency_s": 0.1, "messages": list(messages), "tools": ["bash", "submit"],
                      "response": reply, "prompt_tokens": 100, "completion_tokens": 10})
        messages += [reply, {"role": "tool", "tool_call_id": f"c{i}", "content": "[exit code 0]\n" + "x " * 200}]
    return calls


def make_run(path: Path, n: int) -> None:
    path.mkdir(parents=True)
    info = {"schema_version": 1, "run_id": "bench-scan", "agentcompass_version": "0", "created_at": "",
            "request": {"benchmark": "harbor", "harness": "react", "model": "m"},
            "plan": {"benchmark_class": "", "harness_class": "", "environment_class": "", "executor": "local",
                     "evaluation_environment_mode": "shared", "metric_contract": {"primary": "reward"},
                     "model_roles": {"agent": "m"}}}
    (path / "run.json").write_text(json.dumps(info))
    with open(path / "results.jsonl", "w") as results, open(path / "trajectories.jsonl", "w") as trajectories:
        for i in range(n):
            task = f"task-{i:05d}"
            results.write(json.dumps({"schema_version": 1, "task_id": task, "status": "COMPLETED", "trial": 1,
                                      "attempt": 1, "metrics": {"reward": 1.0}, "artifacts": {}}) + "\n")
            for call in conversation(task, cheat=i % 10 == 0):  # written as the core writes them (compact)
                trajectories.write(json.dumps(call, ensure_ascii=False, separators=(",", ":")) + "\n")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        make_run(run_dir, n)
        size = (run_dir / "trajectories.jsonl").stat().st_size
        scanners = build_scanners(load_plugins(), ())
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        started, cpu = time.perf_counter(), time.process_time()
        outcome = asyncio.run(scan_run(run_dir, scanners))
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"scan of {n} attempts ({size / 1e6:.0f} MB of trajectories, {len(scanners)} scanners): "
          f"{seconds:.2f} s (target <= 10 s; {cpu:.2f} s of CPU), "
          f"peak RSS {peak:.0f} MB (target <= 300 MB; {base:.0f} MB before), "
          f"{len(outcome.findings)} findings")


if __name__ == "__main__":
    main()
