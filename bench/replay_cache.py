"""Figures for record/replay and the model-call cache (issue 24).

1. **Cache cost per call at N entries** (default 100,000; target: lookup + store <= 1 ms): a ``--cache``
   directory filled with N entries of a typical answer, then per call (median and 99th percentile over
   ``--calls`` calls): the canonical key of a typical 12-message request with 4 tools, a lookup that hits, a
   lookup that misses, a store (temporary file + rename), and a whole ``CachingClient.chat`` hit.
2. **Replayed vs live** ``example_interactive`` (``none`` harness, the ``mock`` model answering after
   ``--latency`` seconds a call, like a hosted model; ``--concurrency`` 1 by default): the live run, then the
   same run replayed (``--replay``) — the CLI's wall time and the run's own duration, median of ``--repeat``.

Figures are printed, not asserted. Usage: uv run python bench/replay_cache.py [--entries 100000] [--calls 2000]
[--latency 0.5] [--repeat 3] [--skip-runs]
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
from pathlib import Path
from typing import Any

from agentcompass.models.call_cache import CachingClient, CallCache
from agentcompass.models.call_key import request_key
from agentcompass.runtime.models import ChatResponse, ModelClient, Usage

ROOT = Path(__file__).resolve().parents[1]


def typical_request(i: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """A 12-message tool-using conversation (about 6 KB) with 4 tools; ``i`` makes it unique."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent in /tmp/agentcompass-local-RUN-abcd1234/task-x1y2z3w4. "
                                      + "Follow the rules. " * 40},
        {"role": "user", "content": f"Task {i}: fix the failing test in src/module_{i}.py. " + "Details. " * 30}]
    for turn in range(5):
        call_id = f"call_{i}_{turn}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps(
                {"command": f"pytest -q tests/test_{turn}.py"})}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "output line\n" * 20})
    tools = [{"type": "function", "function": {"name": name, "description": f"The {name} tool. " * 5,
                                               "parameters": {"type": "object", "properties": {
                                                   "command": {"type": "string"}}, "required": ["command"]}}}
             for name in ("bash", "read_file", "write_file", "submit")]
    return messages, tools, {"temperature": 0.0, "max_tokens": 1024, "seed": 1234 + i}


ANSWER = ChatResponse({"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_x", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls -la"}'}}]},
    "model", Usage(1800, 40))


def micro(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered) * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms"


class Never(ModelClient):
    model = "never"

    async def chat(self, messages: Any, *, tools: Any = None, **params: Any) -> ChatResponse:
        raise AssertionError("the bench's hits must not reach the model")


def cache_figures(entries: int, calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ac-bench-cache-") as tmp:
        cache = CallCache.open(Path(tmp) / "cache")
        t0 = time.perf_counter()
        keys = []
        for i in range(entries):
            key = cache.key("openai/gpt-4o-mini", f"{i:064x}")
            cache.put(key, "openai/gpt-4o-mini", ANSWER)
            keys.append(key)
        fill = time.perf_counter() - t0
        print(f"cache at {entries:,} entries (filled in {fill:.1f} s, {fill / entries * 1e3:.3f} ms an entry; "
              f"{sum(1 for _ in cache.root.iterdir())} shard directories)")
        requests = [typical_request(i) for i in range(calls)]
        size = len(json.dumps(requests[0]))
        keying, hits, misses, stores = [], [], [], []
        for i, (messages, tools, params) in enumerate(requests):
            t = time.perf_counter()
            canonical = request_key(messages, tools, params)
            keying.append(time.perf_counter() - t)
            t = time.perf_counter()
            assert cache.get(keys[(i * 7919) % entries]) is not None
            hits.append(time.perf_counter() - t)
            new = cache.key("openai/gpt-4o-mini", canonical)
            t = time.perf_counter()
            assert cache.get(new) is None
            misses.append(time.perf_counter() - t)
            t = time.perf_counter()
            cache.put(new, "openai/gpt-4o-mini", ANSWER)
            stores.append(time.perf_counter() - t)
        client = CachingClient(Never(), cache, "openai/gpt-4o-mini")
        whole = []

        async def hit_all() -> None:
            for messages, tools, params in requests:
                t = time.perf_counter()
                await client.chat(messages, tools=tools, **params)
                whole.append(time.perf_counter() - t)

        asyncio.run(hit_all())
        print(f"  canonical key of a {size:,}-byte request:  {micro(keying)}")
        print(f"  lookup, hit:                          {micro(hits)}")
        print(f"  lookup, miss:                         {micro(misses)}")
        print(f"  store:                                {micro(stores)}")
        both = [a + b + c for a, b, c in zip(keying, misses, stores, strict=True)]
        print(f"  a miss then its store (key included): {micro(both)}   (target <= 1 ms)")
        print(f"  CachingClient.chat, a hit (whole):    {micro(whole)}   (target <= 1 ms)")


def timed_run(*args: str) -> tuple[float, float]:
    """The CLI's wall time and the run's own duration (``summary.json``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "agentcompass.cli.main", "run", "example_interactive", "none",
                           "mock", "--task-lines", "--json", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed, float(json.loads(proc.stdout)["duration_s"])


def run_figures(latency: float, repeat: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ac-bench-replay-") as tmp:
        live_times, replay_times = [], []
        for i in range(repeat):
            live = Path(tmp) / f"live{i}"
            live_times.append(timed_run("-m", f"latency={latency}", "-c", str(concurrency), "-o", str(live)))
            replay_times.append(timed_run("-m", f"latency={latency}", "-c", str(concurrency), "--replay",
                                          str(live), "-o", str(Path(tmp) / f"replay{i}")))
        calls = json.loads((Path(tmp) / "live0" / "summary.json").read_text())["usage"]["agent"]["calls"]
        live_s, replay_s = (statistics.median(t[0] for t in live_times),
                            statistics.median(t[0] for t in replay_times))
        live_d, replay_d = (statistics.median(t[1] for t in live_times),
                            statistics.median(t[1] for t in replay_times))
        print(f"example_interactive, none, mock at {latency} s a call ({calls} calls, --concurrency {concurrency}), "
              f"median of {repeat}:")
        print(f"  live:     {live_s:.2f} s wall (CLI), run {live_d:.2f} s (summary.json duration_s)")
        print(f"  replayed: {replay_s:.2f} s wall (CLI), run {replay_d:.2f} s  ({live_d / replay_d:.1f}x faster "
              f"run, {live_s / replay_s:.1f}x faster wall)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--skip-runs", action="store_true")
    args = parser.parse_args()
    cache_figures(args.entries, args.calls)
    if not args.skip_runs:
        run_figures(args.latency, args.repeat, args.concurrency)


if __name__ == "__main__":
    main()
