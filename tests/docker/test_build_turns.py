"""Image building without an engine: ``BuildTurns`` (builds start in the order their images were asked for, at
most ``slots`` at once, whatever order their plans finish in and whichever need no build) and the base images a
Dockerfile names (part of a built image's cache key)."""

from __future__ import annotations

import asyncio

from agentcompass_docker.images import BuildTurns
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 8), slots=st.integers(1, 3), data=st.data())
def test_builds_start_in_ticket_order_within_the_slots(n: int, slots: int, data: st.DataObject) -> None:
    ready_order = data.draw(st.permutations(range(n)))  # the order the plans finish in
    skipped = data.draw(st.sets(st.sampled_from(range(n))))  # found by tag: nothing to build

    async def scenario() -> tuple[list[int], int]:
        turns = BuildTurns(slots)
        tickets = [turns.ticket() for _ in range(n)]
        started: list[int] = []
        most = 0

        async def build(turn: int, delay: int) -> None:
            nonlocal most
            for _ in range(delay):
                await asyncio.sleep(0)
            if turn in skipped:
                turns.skip(turn)
                return
            await turns.acquire(turn)
            started.append(turn)
            most = max(most, turns.running)
            for _ in range(3):
                await asyncio.sleep(0)
            turns.release()

        await asyncio.wait_for(
            asyncio.gather(*(build(t, ready_order.index(t)) for t in tickets)), timeout=5)
        return started, most

    started, most = asyncio.run(scenario())
    assert started == sorted(set(range(n)) - skipped)
    assert most <= slots


def test_a_cancelled_waiter_does_not_block_the_next() -> None:
    async def scenario() -> list[int]:
        turns = BuildTurns(1)
        first, second, third = turns.ticket(), turns.ticket(), turns.ticket()
        started: list[int] = []
        await turns.acquire(first)
        waiting = asyncio.ensure_future(turns.acquire(second))
        await asyncio.sleep(0)
        waiting.cancel()

        async def later() -> None:
            await turns.acquire(third)
            started.append(third)

        task = asyncio.ensure_future(later())
        await asyncio.sleep(0)
        turns.release()
        await asyncio.wait_for(task, 2)
        return started

    assert asyncio.run(scenario()) == [2]


def test_the_bases_a_dockerfile_names() -> None:
    from agentcompass_docker.images import dockerfile_bases

    text = ("# syntax=docker/dockerfile:1\nARG PY=3.10\nFROM --platform=linux/amd64 python:${PY}-slim AS build\n"
            "RUN echo \\\n  hi\nFROM build AS test\nFROM scratch\nCOPY --from=build /a /a\nCOPY --from=0 /b /b\n"
            "COPY --from=agentcompass-agent:x-1 /opt /opt\nFROM python:3.10-slim\n")
    assert dockerfile_bases(text) == ["python:3.10-slim", "agentcompass-agent:x-1"]
    assert dockerfile_bases(text, {"PY": "3.11"}) == ["python:3.11-slim", "agentcompass-agent:x-1", "python:3.10-slim"]
    assert dockerfile_bases("FROM $BASE\n", {}) == []  # an empty name is no base (the build says what is wrong)
