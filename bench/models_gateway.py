"""Real HTTP model calls, end to end through the runner: the provider path and the gateway path.

Workload: N tasks (default 1,000), each making K=3 chat calls one after another, against a local
OpenAI-compatible server in a child process that answers after a fixed latency (default 100 ms). Model
``openai-compatible/bench``: the real provider (aiohttp, one pooled session, ``--max-connections``), real
metering into trajectories, the ``local`` environment, results and logs in a real run directory, at
concurrency 100.

Two paths:
  * ``client``  — the run phase calls ``plan.models["agent"]`` (what a Python harness does);
  * ``gateway`` — the run phase hands the attempt's endpoint and token to a *caller process* (standing in for
    code inside an environment, which never shares the runtime's process), which makes the K calls over HTTP
    to the gateway; the gateway meters them and forwards them with the same provider.

Prints for each path: wall time, ideal = N·K·latency ÷ min(concurrency, max-connections), measured ÷ ideal.
For the gateway path also the gateway's added latency per call, p50 and p95: what the caller saw minus what
the provider call inside the gateway took (routing, token check, JSON, metering and the extra HTTP hop,
plus any wait for the event loop under load), under the full load and, separately, unloaded (one task at a
time, 300 calls). Targets (issue): at most 1.2 x ideal; at most 2 ms median added by the gateway.

For scale, the runtime's own floor is ``bench/overhead.py``'s 100 ms case (mock model, no HTTP).

Usage: uv sync --compile-bytecode && uv run python bench/models_gateway.py [--n 1000] [--latency 0.1]
       [--concurrency 100] [--max-connections 100] [--paths client gateway]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from agentcompass import hookimpl
from agentcompass.plugins import load_plugins
from agentcompass.runner import Runner
from agentcompass.runtime import HarnessFreeBenchmark, RunRequest, RunResult, TaskSpec, TaskStatus

K = 3


# -- the caller process: K sequential calls per job, many jobs at once --------------------------------------


async def _post(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str, token: str,
                body: bytes) -> tuple[int, bytes]:
    """One HTTP/1.1 keep-alive POST on an open connection (a deliberately lean client: on a small machine the
    caller's CPU would otherwise compete with the runtime it measures)."""
    writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(int(v) for k, _, v in (ln.partition(":") for ln in lines[1:]) if k.lower() == "content-length")
    return status, await reader.readexactly(length)


async def caller_main() -> None:
    """Read jobs (one JSON line each) on stdin; answer each with the latencies the caller saw."""
    from urllib.parse import urlsplit

    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    out = sys.stdout
    tasks: set[asyncio.Task[None]] = set()

    async def job(spec: dict[str, Any]) -> None:
        url = urlsplit(spec["url"])
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"question {spec['id']}"}]
        latencies, error = [], None
        try:
            for _ in range(spec["k"]):
                payload = json.dumps({"model": spec["model"], "messages": messages}).encode()
                t0 = time.perf_counter()
                status, body = await _post(reader, writer, url.netloc, f"{url.path}/chat/completions",
                                           spec["token"], payload)
                latencies.append(time.perf_counter() - t0)
                if status != 200:
                    error = f"gateway answered {status}: {body[:300]!r}"
                    break
                reply = json.loads(body)
                messages += [reply["choices"][0]["message"], {"role": "user", "content": "and then?"}]
        finally:
            writer.close()
        out.write(json.dumps({"id": spec["id"], "latencies": latencies, "error": error}) + "\n")
        out.flush()

    while line := await stdin.readline():
        task = asyncio.create_task(job(json.loads(line)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)


class Caller:
    """The main process's handle on the caller process."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.reader: asyncio.Task[None] | None = None
        self.starting = asyncio.Lock()

    async def call(self, spec: dict[str, Any]) -> dict[str, Any]:
        async with self.starting:
            if self.proc is None:
                self.proc = await asyncio.create_subprocess_exec(
                    sys.executable, __file__, "--caller", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    limit=2**20)
                self.reader = asyncio.create_task(self._read())
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[spec["id"]] = future
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(spec) + "\n").encode())
        return await future

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            reply = json.loads(line)
            self.waiting.pop(reply["id"]).set_result(reply)

    async def close(self) -> None:
        if self.proc is not None:
            global CALLER_CPU
            CALLER_CPU = cpu_seconds(self.proc.pid)
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            await self.proc.wait()
            if self.reader is not None:
                await self.reader
            self.proc = None


# -- the benchmark -------------------------------------------------------------------------------------------


class CallsBenchmark(HarnessFreeBenchmark):
    name = "bench_model_calls"
    seen: ClassVar[dict[tuple[str, int], float]] = {}
    caller: ClassVar[Caller | None] = None

    def __init__(self, n: str = "1000", via: str = "client") -> None:
        super().__init__()
        self.n, self.via = int(n), via

    def load_tasks(self, req):
        return (TaskSpec(task_id=f"task-{i}", category="bench") for i in range(self.n))

    async def run_task(self, task, prepared, req, plan, env=None):
        if self.via == "client":
            messages: list[dict[str, Any]] = [{"role": "user", "content": f"question {task.task_id}"}]
            for _ in range(K):
                reply = await plan.models["agent"].chat(messages)
                messages += [dict(reply.message), {"role": "user", "content": "and then?"}]
            answer = messages[-2]["content"]
        else:
            endpoint = plan.model_endpoints["agent"]
            assert self.caller is not None
            reply = await self.caller.call({"id": task.task_id, "url": endpoint.base_url, "k": K,
                                            "token": endpoint.api_key, "model": endpoint.model})
            if reply["error"]:
                raise RuntimeError(reply["error"])
            for i, latency in enumerate(reply["latencies"]):
                self.seen[(task.task_id, i)] = latency
            answer = "ok"
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         final_answer=answer)

    async def evaluate(self, task, prepared, result, req, plan, env=None):
        return replace(result, metrics={"score": 1.0})


class BenchPlugin:
    @hookimpl
    def register_benchmarks(self, register):
        register("bench_model_calls", CallsBenchmark)


# -- driver --------------------------------------------------------------------------------------------------


CALLER_CPU = 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux), 0.0 where /proc is unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    # The loopback server of the models plugin's tests (tests/models/fake_server.py), run from the checkout.
    proc = subprocess.Popen([sys.executable, "-m", "tests.models.fake_server", "--latency", str(latency),
                             "--fixed-reply", "Fine, thanks."], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def _run(host: Any, req: RunRequest, run_dir: Path) -> Any:
    CallsBenchmark.caller = Caller()
    try:
        return await Runner(host, req, run_dir=run_dir, handle_signals=False).run()
    finally:
        await CallsBenchmark.caller.close()
        CallsBenchmark.caller = None


MAIN_CPU = 0.0


def run_path(base_url: str, via: str, n: int, concurrency: int, max_connections: int
             ) -> tuple[float, list[float]]:
    """Wall seconds of one run, and the gateway's added milliseconds per call (gateway path)."""
    host = load_plugins()
    host.add_plugin(BenchPlugin(), "bench")
    req = RunRequest(benchmark="bench_model_calls", harness="none", model="openai-compatible/bench",
                     benchmark_args={"n": str(n), "via": via}).with_options(
        model_base_url=base_url, concurrency=concurrency, max_connections=max_connections)
    CallsBenchmark.seen.clear()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        started, cpu0 = time.perf_counter(), time.process_time()
        outcome = asyncio.run(_run(host, req, run_dir))
        wall = time.perf_counter() - started
        global MAIN_CPU
        MAIN_CPU = time.process_time() - cpu0
        assert outcome.summary["status_counts"] == {"COMPLETED": n}, outcome.summary["status_counts"]
        assert outcome.summary["usage"]["agent"]["calls"] == n * K
        metered = {}
        with open(run_dir / "trajectories.jsonl", encoding="utf-8") as f:
            for line in f:
                call = json.loads(line)
                metered[(call["task_id"], call["index"])] = call["latency_s"]
    added = [(seen - metered[key]) * 1000 for key, seen in CallsBenchmark.seen.items()]
    return wall, added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--max-connections", type=int, default=100)
    parser.add_argument("--paths", nargs="+", default=["client", "gateway"], choices=["client", "gateway"])
    parser.add_argument("--caller", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.caller:
        asyncio.run(caller_main())
        return

    server, base_url = start_server(args.latency)
    ideal = args.n * K * args.latency / min(args.concurrency, args.max_connections)
    print(f"{args.n} tasks x {K} calls, server latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}, "
          f"--max-connections {args.max_connections}; ideal {ideal:.2f} s")
    try:
        for via in args.paths:
            global CALLER_CPU
            CALLER_CPU, server_cpu = 0.0, cpu_seconds(server.pid)
            wall, added = run_path(base_url, via, args.n, args.concurrency, args.max_connections)
            server_cpu = cpu_seconds(server.pid) - server_cpu
            print(f"  {via:8s} path: {wall:.2f} s, measured / ideal = {wall / ideal:.2f}  (target <= 1.2); CPU s: "
                  f"runtime {MAIN_CPU:.2f}, caller {CALLER_CPU:.2f}, model server {server_cpu:.2f} "
                  f"on {os.cpu_count()} cores")
            if via == "gateway":
                print(f"           gateway added latency per call under load: p50 {pct(added, 0.5):.2f} ms, "
                      f"p95 {pct(added, 0.95):.2f} ms, mean {statistics.fmean(added):.2f} ms")
                _, quiet = run_path(base_url, via, 100, 1, args.max_connections)
                print(f"           unloaded (one task at a time, {len(quiet)} calls): p50 {pct(quiet, 0.5):.2f} ms, "
                      f"p95 {pct(quiet, 0.95):.2f} ms  (target p50 <= 2 ms)")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
