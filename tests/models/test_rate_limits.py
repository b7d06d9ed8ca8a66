"""Riding out rate limits: the concurrency of calls to a provider adapts to its answers (AIMD), honours
Retry-After, and a run against a provider that rate-limits hard finishes every task."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agentcompass.cli.progress import Progress
from agentcompass.runtime.rate_limits import DECREASE, AdaptiveLimit, throttled
from agentcompass.testing import LoopbackOpenAI

from tests.helpers.cli_processes import read_jsonl, run_cli_subprocess

#: Calls the loopback provider answers at once; beyond, 429.
CAPACITY = 4


class RateLimitedProvider:
    """A responder for :class:`LoopbackOpenAI` allowing ``CAPACITY`` concurrent calls (each ``seconds`` long)
    and answering 429 to any beyond; counts what it did."""

    def __init__(self, seconds: float = 0.05) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()
        self.now = self.peak = self.refused = self.answered = 0

    def __call__(self, request: dict[str, Any]) -> Any:
        with self.lock:
            if self.now >= CAPACITY:
                self.refused += 1
                return 429, {"error": {"message": f"at most {CAPACITY} calls at once", "type": "rate_limit_error"}}
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(self.seconds)
            return {"role": "assistant", "content": "ok"}
        finally:
            with self.lock:
                self.now -= 1
                self.answered += 1


@pytest.mark.timeout(600)
def test_a_hard_rate_limited_run_at_concurrency_32_completes_every_task_settling_near_4(tmp_path: Path) -> None:
    provider = RateLimitedProvider()
    out = tmp_path / "run"
    with LoopbackOpenAI(provider, api_key=None) as server:
        proc = run_cli_subprocess("run", "scripted", "none", "openai-compatible/loopback", "-b", "n=100",
                                  "-b", "calls=2", "-b", "mode=none", "-c", "32", "--max-retries", "1", "--model-base-url", server.base_url,
                                  "-o", str(out), "--json", timeout=500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = read_jsonl(out / "results.jsonl")
    assert len(results) == 100 and {r["status"] for r in results} == {"COMPLETED"}
    assert provider.answered == 200 and provider.refused > 0  # it did rate-limit, and every call got through
    events = [e for e in read_jsonl(out / "logs.jsonl") if e.get("component") == "rate_limit"]
    decreased = [e for e in events if e["event"] == "rate_limit.decreased"]
    assert decreased and all(e["status"] == 429 for e in decreased)
    assert decreased[0]["previous"] == 64  # from --max-connections down
    settled = [e["limit"] for e in events[len(events) // 2:]]  # the second half of the run
    assert settled and all(2 <= limit <= 2 * CAPACITY for limit in settled), settled
    calls = read_jsonl(out / "trajectories.jsonl")
    assert len(calls) == 200 and all(c["error"] is None for c in calls)


async def test_a_rate_limited_answer_cuts_the_limit_once_per_round() -> None:
    limit = AdaptiveLimit("p", 64)
    tickets = [await limit.acquire() for _ in range(20)]
    for ticket in tickets[:10]:  # ten 429s of the same round: one cut
        limit.rate_limited(ticket, 429)
    assert limit.limit == pytest.approx(20 * DECREASE)
    later = limit.round
    for _ in range(20):
        limit.release()
    assert limit.in_flight == 0
    ticket = await limit.acquire()
    assert ticket == later
    limit.rate_limited(ticket, 503)
    assert limit.limit == pytest.approx(1.0)  # never below one call
    limit.release()


async def test_answers_raise_the_limit_by_about_one_a_round_up_to_the_ceiling() -> None:
    limit = AdaptiveLimit("p", 8)
    limit.limit = 4.0
    for _ in range(4):
        limit.answered()
    assert 4.9 < limit.limit < 5.1
    for _ in range(100):
        limit.answered()
    assert limit.limit == 8


async def test_calls_over_the_limit_wait_in_line_and_go_in_order() -> None:
    limit = AdaptiveLimit("p", 2)
    order: list[int] = []

    async def call(i: int) -> None:
        async with limit.slot():
            order.append(i)
            await asyncio.sleep(0.02)

    await asyncio.gather(*(call(i) for i in range(6)))
    assert order == list(range(6)) and limit.in_flight == 0


async def test_retry_after_holds_new_calls_and_shows_on_the_status_line() -> None:
    limit = AdaptiveLimit("openai at https://api", 4)
    ticket = await limit.acquire()
    limit.rate_limited(ticket, 429, retry_after=0.3)
    limit.release()
    started = time.monotonic()
    waiter = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0.05)
    line = Progress(enabled=False).status_line()
    assert "openai 1/4 calls (1 waiting)" in line, line
    assert [s.provider for s in throttled()].count("openai at https://api") == 1
    await waiter
    assert time.monotonic() - started >= 0.25
    limit.release()


async def test_a_cancelled_wait_gives_its_place_on() -> None:
    limit = AdaptiveLimit("p", 1)
    await limit.acquire()
    waiter = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    limit.release()
    assert limit.in_flight == 0
    assert await asyncio.wait_for(limit.acquire(), 1) == 0
