"""Export time of a 10,000-task run to each format (``agentcompass export inspect`` and ``export atif``).

The run is made once through the real runner (``--run-dir`` keeps it for later invocations): N tasks of a
benchmark whose run phase has a three-call tool-using conversation with the ``mock`` model (a system prompt, a
user request, a tool call and its result, a reply, a follow-up), so every trajectory holds messages, tool calls
and tool results. Each export then runs as the real CLI in a child process; printed: wall time (imports
included), time per task, peak RSS of the child, and the size of what it wrote.

Usage: uv run python bench/export.py [--n 10000] [--run-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from agentcompass import hookimpl
from agentcompass.plugins import load_plugins
from agentcompass.runner import Runner
from agentcompass.runtime import HarnessFreeBenchmark, RunRequest, RunResult, TaskSpec, TaskStatus

SYSTEM = ("You are the support agent of a task-management service. Use the tools you are given, one call at a "
          "time, and tell the user the outcome of each change. " * 4)
TOOLS = [{"type": "function", "function": {
    "name": "get_user", "description": "Look a user up.",
    "parameters": {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}}}]


class ConversationBenchmark(HarnessFreeBenchmark):
    name = "bench_conversation"

    def __init__(self, n: str = "10000") -> None:
        super().__init__()
        self.n = int(n)

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        return (TaskSpec(task_id=f"task-{i}", category=("a", "b")[i % 2]) for i in range(self.n))

    async def run_task(self, task, prepared, req, plan, env=None):  # type: ignore[no-untyped-def]
        model = plan.models["agent"]
        number = task.task_id.split("-")[1]
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"Please get user user_{number} for me."}]
        reply = await model.chat(messages, tools=TOOLS)
        messages.append(dict(reply.message))
        for call in reply.message.get("tool_calls") or ():
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": json.dumps({"user_id": f"user_{number}", "name": f"User {number}"})})
        reply = await model.chat(messages, tools=TOOLS)
        messages += [dict(reply.message), {"role": "user", "content": "Thanks. Anything else on my account?"}]
        reply = await model.chat(messages, tools=TOOLS)
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         final_answer=reply.message.get("content"))

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        return replace(result, metrics={"score": float(int(task.task_id.split("-")[1]) % 3 == 0)})


class BenchPlugin:
    @hookimpl
    def register_benchmarks(self, register):  # type: ignore[no-untyped-def]
        register("bench_conversation", ConversationBenchmark)


def make_run(n: int, run_dir: Path) -> float:
    host = load_plugins()
    host.add_plugin(BenchPlugin(), "bench")
    req = RunRequest(benchmark="bench_conversation", harness="none", model="mock",
                     benchmark_args={"n": str(n)}).with_options(concurrency=100, seed=1)
    started = time.perf_counter()
    outcome = asyncio.run(Runner(host, req, run_dir=run_dir, handle_signals=False).run())
    assert outcome.summary.status_counts == {"COMPLETED": n}, outcome.summary.status_counts
    return time.perf_counter() - started


def timed_cli(*args: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``agentcompass ARGS`` in a child process."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "agentcompass.cli.main", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    err = child.stderr.read().decode() if child.stderr else ""
    assert os.waitstatus_to_exitcode(status) == 0, err
    return wall, usage.ru_maxrss / 1024


def size_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 1e6
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--run-dir", type=Path, default=None, help="Keep (or reuse) the run here.")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="agentcompass-bench-export-"))
    try:
        run_dir = args.run_dir or tmp / "run"
        if not (run_dir / "summary.json").exists():
            took = make_run(args.n, run_dir)
            print(f"made a {args.n}-task run in {took:.1f} s")
        lines = sum(1 for _ in open(run_dir / "trajectories.jsonl", "rb"))
        print(f"export of a {args.n}-task run ({lines} model calls, trajectories.jsonl "
              f"{size_mb(run_dir / 'trajectories.jsonl'):.1f} MB), each as the real CLI in a child process:")
        for fmt, out in (("inspect", tmp / "run.eval"), ("atif", tmp / "atif")):
            wall, rss = timed_cli("export", fmt, str(run_dir), "-o", str(out))
            print(f"  {fmt:<7}: {wall:6.1f} s, {wall / args.n * 1000:.2f} ms per task, peak RSS {rss:.0f} MB, "
                  f"wrote {size_mb(out):.1f} MB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
