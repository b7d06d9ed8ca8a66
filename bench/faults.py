"""Figures for fault injection and rate limits (issue 38).

1. **Gateway overhead of ``--faults`` at rate 0** (target <= 2%): the run's gateway on loopback, a scripted
   model answering at once behind it, ``--calls`` chat-completions calls over real HTTP from ``--clients``
   concurrent clients; each round times the same calls with the role's client granted as is (no
   ``--faults``) and wrapped by a ``--faults`` profile whose rates are all 0. Rounds alternate; the medians of
   ``--rounds`` are compared.
2. **A rate-limited run vs the ideal**: a loopback OpenAI-compatible provider that answers at most 4 calls at
   once (``--latency`` seconds each) and 429 beyond; the ``scripted`` test benchmark (100 tasks, 2 calls each,
   no harness) through the real CLI at concurrency 32 and at concurrency 4: wall time, every task's status,
   the 429s answered, where the adaptive limit settled (``logs.jsonl``), and each against the ideal
   (calls x latency / 4).

Figures are printed, not asserted. Usage: uv run python bench/faults.py [--calls 2000] [--clients 16]
[--rounds 5] [--latency 0.05] [--skip-overhead] [--skip-rate-limit]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
from agentcompass.models.fault_profiles import FaultProfile
from agentcompass.models.faults import FaultSource
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.runtime.models import ChatResponse, ModelClient
from agentcompass.testing import LoopbackOpenAI
from agentcompass.testing.scripted_models import ScriptedModel, text

ROOT = Path(__file__).resolve().parents[1]


async def _timed_calls(gateway: ModelGateway, faults: bool, calls: int, clients: int) -> float:
    model = ScriptedModel(lambda request: text("ok"))
    meter = TaskMeter("t", 1, seed=1)
    granted: Any = {"agent": model}
    if faults:
        granted = FaultSource(FaultProfile("zero")).decorate(granted, meter)
    token, _ = gateway.grant(granted, meter, gateway.base_url)
    body = json.dumps({"model": "agent", "messages": [{"role": "user", "content": "hi"}]})
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    url = gateway.base_url + "/chat/completions"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as session:
        async def one_client(n: int) -> None:
            for _ in range(n):
                async with session.post(url, data=body, headers=headers) as r:
                    assert r.status == 200, await r.text()
                    await r.read()

        started = time.perf_counter()
        await asyncio.gather(*(one_client(calls // clients) for _ in range(clients)))
        elapsed = time.perf_counter() - started
    gateway.revoke(token)
    return elapsed


class Constant(ModelClient):
    """The cheapest model there is: the same answer at once (so what is timed is the wrapper)."""

    model = "constant"
    answer = ChatResponse(message={"role": "assistant", "content": "ok"}, model="constant")

    async def chat(self, messages: Any, *, tools: Any = None, **params: Any) -> ChatResponse:
        return self.answer


async def _in_process(calls: int, faults: bool) -> float:
    model: Any = Constant()
    meter = TaskMeter("t", 1, seed=1)
    if faults:
        model = FaultSource(FaultProfile("zero")).decorate({"agent": model}, meter)["agent"]
    messages = [{"role": "user", "content": "hi"}]
    started = time.perf_counter()
    for _ in range(calls):
        await model.chat(messages)
    return time.perf_counter() - started


async def overhead(calls: int, clients: int, rounds: int) -> None:
    n = 20_000
    direct_runs, wrapped_runs = [], []
    for _ in range(rounds):  # interleaved; the fastest of each (the least disturbed by a shared machine)
        direct_runs.append(await _in_process(n, False))
        wrapped_runs.append(await _in_process(n, True))
    direct, wrapped = min(direct_runs), min(wrapped_runs)
    added = (wrapped - direct) / n
    print(f"in process, {n} calls of a constant model: the --faults wrapper at rates 0 adds "
          f"{added * 1e6:.1f} us a call")
    gateway = ModelGateway({"agent": "scripted"})
    await gateway.start()
    try:
        await _timed_calls(gateway, False, calls // 4, clients)  # warm up
        plain, faulted = [], []
        for _ in range(rounds):
            plain.append(await _timed_calls(gateway, False, calls, clients))
            faulted.append(await _timed_calls(gateway, True, calls, clients))
    finally:
        await gateway.stop()
    p, f = min(plain), min(faulted)
    print(f"gateway, {calls} calls from {clients} clients, fastest of {rounds} interleaved rounds:")
    print(f"  no --faults          {p:.3f} s  ({p / calls * 1e6:.0f} us a call)")
    print(f"  --faults (rates 0)   {f:.3f} s  ({f / calls * 1e6:.0f} us a call)")
    print(f"  overhead             {(f / p - 1) * 100:+.2f} %  (target <= 2 %; noisy on a shared machine)")
    print(f"  the wrapper's own {added * 1e6:.1f} us is {added / (p / calls) * 100:.2f} % of a gateway call here")


class Limited:
    """At most 4 calls at once, ``seconds`` each; 429 beyond."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.lock, self.now, self.refused = seconds, threading.Lock(), 0, 0

    def __call__(self, request: dict[str, Any]) -> Any:
        with self.lock:
            if self.now >= 4:
                self.refused += 1
                return 429, {"error": {"message": "at most 4 calls at once", "type": "rate_limit_error"}}
            self.now += 1
        try:
            time.sleep(self.seconds)
            return {"role": "assistant", "content": "ok"}
        finally:
            with self.lock:
                self.now -= 1


def rate_limited(latency: float) -> None:
    n, calls = 100, 2
    ideal = n * calls * latency / 4
    print(f"rate-limited provider (4 calls at once, {latency * 1000:.0f} ms a call; 429 beyond), {n} tasks x "
          f"{calls} calls; ideal {ideal:.2f} s of model time:")
    times: dict[int, float] = {}
    runs: dict[int, float] = {}
    for concurrency in (4, 32):
        provider = Limited(latency)
        with tempfile.TemporaryDirectory() as tmp, LoopbackOpenAI(provider, api_key=None) as server:
            out = Path(tmp) / "run"
            started = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "tests.helpers.cli", "run", "scripted", "none",
                                   "openai-compatible/loopback", "-b", f"n={n}", "-b", f"calls={calls}", "-b",
                                   "mode=none", "-c", str(concurrency), "--model-base-url", server.base_url,
                                   "-o", str(out), "--json"], cwd=ROOT, capture_output=True, text=True)
            wall = times[concurrency] = time.perf_counter() - started
            summary = json.loads((out / "summary.json").read_text())
            events = [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines()]
            limits = [e["limit"] for e in events if e.get("component") == "rate_limit"]
            duration = summary.get("duration_s")
        runs[concurrency] = duration
        print(f"  concurrency {concurrency:>2}: exit {proc.returncode}, {summary['status_counts']}, wall {wall:.2f} s "
              f"(run {duration:.2f} s), 429s {provider.refused}, limit changes {len(limits)}"
              + (f", settled at {limits[-1]} (last 10: {limits[-10:]})" if limits else ""))
    print(f"  concurrency 32 / concurrency 4: {runs[32] / runs[4]:.2f}x the run's own duration, "
          f"{times[32] / times[4]:.2f}x wall (process start included)  (target <= 1.3x); "
          f"concurrency 32 / ideal: {runs[32] / ideal:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-rate-limit", action="store_true")
    args = parser.parse_args()
    if not args.skip_overhead:
        asyncio.run(overhead(args.calls, args.clients, args.rounds))
    if not args.skip_rate_limit:
        rate_limited(args.latency)


if __name__ == "__main__":
    main()
