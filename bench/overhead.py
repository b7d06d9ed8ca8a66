"""Runtime overhead of agentcompass itself, measured end to end through the real runner.

Workload: N tasks of a benchmark whose run phase calls the agent model K=3 times through the in-process
client, with the ``mock`` provider, in the ``local`` environment (a real working directory per task), with
results, trajectories and logs written to a real run directory.

Prints:
  * overhead per task at 0 ms model latency (wall time ÷ N), at concurrency 8 and 100;
  * the 100 ms latency case at concurrency 100: measured ÷ ideal, ideal = N·K·latency ÷ concurrency;
  * whole-process wall time and peak RSS of a run at N=1,000 and N=10,000 (each in a child process: imports,
    plugin loading, the run and its files);
  * start-up time of ``agentcompass plugins list`` (median of 5).

With ``--otel``, instead: the cost of OpenTelemetry tracing (agentcompass-otel) at 0 ms model latency, the
worst case — per-task time with tracing on (spans exported over OTLP/HTTP to a sink on loopback, in a child
process) against off (the plugin installed, ``--otel`` not given) and absent (the plugin not loaded), the
median of 6 alternating runs (the order rotated) each at concurrency 8 and 100; and the same runs' CPU time
per task, of the run's process (all its threads) and of the exporting child process agentcompass-otel sends the
spans through.

With ``--inspect``, instead: the whole-process comparison with Inspect AI (the issue's "overhead against Inspect
AI, 1,000 tasks x 3 stub calls, whole process"): a child process running N tasks through agentcompass (as above,
concurrency 100) against a child process running the same N samples x 3 ``generate`` calls through
``inspect_ai.eval`` with its ``mockllm`` model (usage given, so no tokenizer is loaded; max_samples 100), both with
compiled bytecode (a cache of the bench's own, warmed by one untimed run of each, like an installed wheel), 3
alternating runs each; prints the median wall and CPU (user+sys of the child) of each and agentcompass ÷ Inspect.

With ``--scan``, instead: the cost of ``run --scan`` with every built-in scanner (each attempt's transcript
scanned as it finishes, from the records the run hands over) against the same run without it, the median of 5
alternating runs each at concurrency 8 and 100 (target ≤ 5%), and the CPU time spent inside the scan observer's
hooks (this thread's: what a busy machine moves least).

Usage: uv sync --compile-bytecode && uv run python bench/overhead.py [--n 1000] [--rss-n 10000] [--otel] [--scan]
[--inspect]
(byte-compiling once matters where PYTHONDONTWRITEBYTECODE is set: otherwise every start compiles its imports).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
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

K = 3


class CallsBenchmark(HarnessFreeBenchmark):
    name = "bench_calls"

    def __init__(self, n: str = "1000") -> None:
        super().__init__()
        self.n = int(n)

    def load_tasks(self, req):
        return (TaskSpec(task_id=f"task-{i}", category=("a", "b")[i % 2]) for i in range(self.n))

    async def run_task(self, task, prepared, req, plan, env=None):
        messages = [{"role": "user", "content": f"question {task.task_id}"}]
        for _ in range(K):
            reply = await plan.models["agent"].chat(messages)
            messages.append(dict(reply.message))
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         final_answer=messages[-1]["content"])

    async def evaluate(self, task, prepared, result, req, plan, env=None):
        return replace(result, metrics={"score": 1.0})


class BenchPlugin:
    @hookimpl
    def register_benchmarks(self, register):
        register("bench_calls", CallsBenchmark)


#: CPU seconds (this thread's) spent inside the scan observer's hooks, summed over the runs with ``scan``.
SCAN_CPU: list[float] = []


def timed_scan_observer(host):  # type: ignore[no-untyped-def]
    """``run --scan``'s observer with every built-in scanner, adding the CPU time its hooks take to SCAN_CPU."""
    from agentcompass.scanning.engine import build_scanners
    from agentcompass.scanning.observer import ScanObserver

    class Timed(ScanObserver):
        @hookimpl
        def agentcompass_run_started(self, run_dir: str) -> None:
            started = time.thread_time()
            super().agentcompass_run_started(run_dir)
            SCAN_CPU.append(time.thread_time() - started)

        @hookimpl
        def agentcompass_result_recorded(self, record) -> None:  # type: ignore[no-untyped-def]
            started = time.thread_time()
            super().agentcompass_result_recorded(record)
            SCAN_CPU[-1] += time.thread_time() - started

        @hookimpl
        def agentcompass_run_finished(self, run_id: str, summary) -> None:  # type: ignore[no-untyped-def]
            started = time.thread_time()
            super().agentcompass_run_finished(run_id, summary)
            SCAN_CPU[-1] += time.thread_time() - started

    return Timed(build_scanners(host, ()))


def run_once(n: int, concurrency: int, latency: float, otel: str = "off", scan: bool = False) -> float:
    """Seconds to run N tasks; ``otel``: ``off`` (the plugin loaded, tracing off), ``on`` or ``absent``;
    ``scan``: with every built-in scanner as ``run --scan`` registers them."""
    if otel == "on":
        os.environ["AGENTCOMPASS_OTEL"] = "1"  # read as the plugins are loaded: off, the plugin registers no hook
    host = load_plugins()
    host.add_plugin(BenchPlugin(), "bench")
    if scan:
        from agentcompass.scanning.observer import SCAN_PLUGIN

        host.add_plugin(timed_scan_observer(host), SCAN_PLUGIN)
    if otel == "absent":
        host.remove_plugin("otel")
    req = RunRequest(benchmark="bench_calls", harness="none", model="mock", benchmark_args={"n": str(n)},
                     model_args={"latency": str(latency)} if latency else {}).with_options(concurrency=concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        try:
            outcome = asyncio.run(Runner(host, req, run_dir=Path(tmp) / "run", handle_signals=False).run())
        finally:
            os.environ.pop("AGENTCOMPASS_OTEL", None)
        elapsed = time.perf_counter() - started
    summary = outcome.summary
    assert summary.status_counts == {"COMPLETED": n}, summary.status_counts
    assert summary.usage["agent"].calls == n * K
    return elapsed


def rss_child(n: int) -> None:
    run_once(n, 100, 0.0)
    print(json.dumps({"maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def whole_process(n: int) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of a child process that imports everything and runs N tasks."""
    started = time.perf_counter()
    child = subprocess.run([sys.executable, __file__, "--rss-child", str(n)], capture_output=True, text=True,
                           check=True)
    wall = time.perf_counter() - started
    return wall, json.loads(child.stdout.strip().splitlines()[-1])["maxrss_kb"] / 1024


def inspect_child(n: int) -> None:
    """Run N samples x K mockllm ``generate`` calls through Inspect AI (the peer of ``rss_child``)."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage
    from inspect_ai.scorer import includes
    from inspect_ai.solver import solver

    def reply(input, tools, tool_choice, config):  # type: ignore[no-untyped-def]
        output = ModelOutput.from_content(model="mockllm", content="mock reply")
        output.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        return output

    @solver  # type: ignore[misc]
    def calls():  # type: ignore[no-untyped-def]
        async def solve(state, generate):  # type: ignore[no-untyped-def]
            for _ in range(K):
                state = await generate(state)
            return state
        return solve

    with tempfile.TemporaryDirectory() as tmp:
        task = Task(dataset=[Sample(input=f"question task-{i}", target="x") for i in range(n)], solver=calls(),
                    scorer=includes())
        log = inspect_eval(task, model="mockllm/model", model_args={"custom_outputs": reply}, display="none",
                           log_dir=tmp, max_samples=100, max_connections=100)[0]
        assert log.status == "success" and len(log.samples or []) == n, (log.status, log.error)


def child_cost(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user+sys) seconds of ``python bench/overhead.py ARGS`` in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, __file__, *args], capture_output=True, check=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def inspect_overhead(n: int) -> None:
    print(f"against Inspect AI — whole process, N={n} tasks × K={K} stub calls (agentcompass mock / Inspect "
          f"mockllm), concurrency 100, compiled bytecode; median of 3 alternating runs")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": cache}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        sides = {"agentcompass": ["--rss-child", str(n)], "inspect": ["--inspect-child", str(n)]}
        for args in sides.values():
            child_cost(args, env)  # warm the bytecode cache
        costs: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        for _ in range(3):
            for side, args in sides.items():
                costs[side].append(child_cost(args, env))
    wall = {side: statistics.median(c[0] for c in runs) for side, runs in costs.items()}
    cpu = {side: statistics.median(c[1] for c in runs) for side, runs in costs.items()}
    for side in sides:
        print(f"  {side:>12}: wall {wall[side]:.2f} s, CPU {cpu[side]:.2f} s")
    print(f"  overhead against Inspect AI (agentcompass ÷ Inspect): wall {wall['agentcompass'] / wall['inspect']:.3f} "
          f"({wall['inspect'] / wall['agentcompass']:.1f}× faster), CPU {cpu['agentcompass'] / cpu['inspect']:.3f} "
          f"({cpu['inspect'] / cpu['agentcompass']:.1f}× faster)  (target ≤ 0.05)")


#: An OTLP/HTTP sink: accepts every export request and drops it (run in a child process).
SINK = """
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *args): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@contextlib.contextmanager
def otlp_sink():  # type: ignore[no-untyped-def]
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        port = int(sink.stdout.readline())  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}"
    finally:
        sink.terminate()
        sink.wait()


def scan_overhead(n: int) -> None:
    print(f"run --scan overhead — N={n} tasks × K={K} in-process mock calls, 0 ms latency, local environment, every "
          f"built-in scanner; median of 5 alternating runs")
    for concurrency in (8, 100):
        times: dict[bool, list[float]] = {False: [], True: []}
        cpu: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(5):
            for scan in times:
                started = time.process_time()
                times[scan].append(run_once(n, concurrency, 0.0, scan=scan))
                cpu[scan].append(time.process_time() - started)
        off, on = (statistics.median(times[k]) / n * 1000 for k in (False, True))
        cpu_off, cpu_on = (statistics.median(cpu[k]) / n * 1000 for k in (False, True))
        inside = statistics.median(SCAN_CPU) / n * 1000
        SCAN_CPU.clear()
        print(f"  concurrency {concurrency:>3}: without {off:.3f} ms/task, with --scan {on:.3f} ms/task "
              f"({(on / off - 1) * 100:+.1f}%; target ≤ 5%); CPU {cpu_off:.3f} → {cpu_on:.3f} ms/task "
              f"({(cpu_on / cpu_off - 1) * 100:+.1f}%); CPU inside the scan observer {inside:.3f} ms/task "
              f"({inside / cpu_off * 100:.1f}% of the run's CPU without it: the figure a busy machine moves least)")


def _children_cpu() -> float:
    """CPU seconds of this process's children that ended and were waited for (the exporting processes)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def otel_overhead(n: int) -> None:
    print(f"OpenTelemetry overhead — N={n} tasks × K={K} in-process mock calls, 0 ms latency, local environment; "
          f"median of 6 alternating runs, the order rotated")
    with otlp_sink() as endpoint:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        for concurrency in (8, 100):
            times: dict[str, list[float]] = {"absent": [], "off": [], "on": []}
            cpu: dict[str, list[float]] = {mode: [] for mode in times}
            child_cpu: dict[str, list[float]] = {mode: [] for mode in times}
            modes = list(times)
            for round_ in range(6):  # each mode in each position twice: no mode always runs first or last
                for mode in modes[round_ % 3:] + modes[:round_ % 3]:
                    started, children = time.process_time(), _children_cpu()
                    times[mode].append(run_once(n, concurrency, 0.0, otel=mode))
                    cpu[mode].append(time.process_time() - started)
                    child_cpu[mode].append(_children_cpu() - children)
            med = {mode: statistics.median(t) / n * 1000 for mode, t in times.items()}
            print(f"  concurrency {concurrency:>3}: plugin absent {med['absent']:.3f} ms/task, tracing off "
                  f"{med['off']:.3f} ms/task ({(med['off'] / med['absent'] - 1) * 100:+.1f}%), tracing on "
                  f"{med['on']:.3f} ms/task ({(med['on'] / med['off'] - 1) * 100:+.1f}% against off; "
                  f"target ≤ 10%)")
            # CPU time (what a busy machine moves least): this process, all its threads; and the exporting
            # child process's (agentcompass-otel makes, encodes and sends the spans there, off the run's process)
            c = {mode: statistics.median(t) / n * 1000 for mode, t in cpu.items()}
            child = statistics.median(child_cpu["on"]) / n * 1000
            print(f"      CPU of the run's process: absent {c['absent']:.3f} ms/task, off {c['off']:.3f} ms/task "
                  f"({(c['off'] / c['absent'] - 1) * 100:+.1f}%), on {c['on']:.3f} ms/task "
                  f"({(c['on'] / c['off'] - 1) * 100:+.1f}% against off); the exporting process's {child:.3f} "
                  f"ms/task; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rss-n", type=int, default=10_000)
    parser.add_argument("--rss-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--otel", action="store_true", help="Measure the cost of OpenTelemetry tracing only.")
    parser.add_argument("--scan", action="store_true", help="Measure the cost of run --scan only.")
    parser.add_argument("--inspect", action="store_true", help="Compare whole processes with Inspect AI only.")
    parser.add_argument("--inspect-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child is not None:
        rss_child(args.rss_child)
        return
    if args.inspect_child is not None:
        inspect_child(args.inspect_child)
        return
    if args.inspect:
        inspect_overhead(args.n)
        return
    if args.otel:
        otel_overhead(args.n)
        return
    if args.scan:
        scan_overhead(args.n)
        return

    n = args.n
    print(f"agentcompass runtime overhead — N={n} tasks × K={K} in-process mock calls, local environment")
    for concurrency in (8, 100):
        elapsed = run_once(n, concurrency, 0.0)
        print(f"  0 ms latency, concurrency {concurrency:>3}: {elapsed:.2f} s total, "
              f"{elapsed / n * 1000:.2f} ms per task  (target ≤ 2 ms)")
    latency, concurrency = 0.1, 100
    ideal = n * K * latency / concurrency
    elapsed = run_once(n, concurrency, latency)
    print(f"  100 ms latency, concurrency {concurrency}: {elapsed:.2f} s measured, {ideal:.2f} s ideal, "
          f"ratio {elapsed / ideal:.3f}  (target ≤ 1.2)")

    for whole_n in (1000, args.rss_n):
        wall, rss_mb = whole_process(whole_n)
        print(f"  whole process at N={whole_n}: {wall:.2f} s, {wall / whole_n * 1000:.2f} ms per task, "
              f"peak RSS {rss_mb:.1f} MB  (RSS target ≤ 150 MB)")

    times = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "agentcompass.cli.main", "plugins", "list"], check=True,
                       capture_output=True)
        times.append(time.perf_counter() - started)
    print(f"  start-up of 'agentcompass plugins list': median {statistics.median(times):.3f} s over 5 "
          f"(target ≤ 0.5 s)")


if __name__ == "__main__":
    main()
