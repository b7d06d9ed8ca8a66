"""Image building without an engine: ``BuildTurns`` (builds start in the order their images were asked for, at
most ``slots`` at once, whatever order their plans finish in and whichever need no build) and the base images a
Dockerfile names (part of a built image's cache key)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentcompass.runtime.types import EnvironmentSpec
from agentcompass_docker.images import BuildPlan, BuildTurns, ImageInfo, Images
from agentcompass_docker.options import DockerOptions
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


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 6), slots=st.integers(1, 2), data=st.data())
def test_contexts_of_the_same_content_build_once_whatever_order_their_plans_finish_in(
        n: int, slots: int, data: st.DataObject) -> None:
    """Contexts with the same content share one tag and one build. A context whose plan finishes after another
    of its tag started building must give up its turn at once (it builds nothing): holding it made the build,
    which waits for every earlier turn, and the context, which waits for the build, wait for each other — the
    intermittent hang of a first harbor run in docker (many tasks with the same Dockerfile)."""
    tags = data.draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n))
    plan_delay = data.draw(st.permutations(range(n)))  # the order the plans finish in
    existing = data.draw(st.sets(st.sampled_from("abc")))  # tags already built earlier

    class Engine:
        async def call(self, fn, *args):  # type: ignore[no-untyped-def]
            if fn.__name__ == "_plan_build":
                for _ in range(plan_delay[int(args[0].name)] * 3):
                    await asyncio.sleep(0)
            else:
                for _ in range(4):
                    await asyncio.sleep(0)
            return fn(*args)

    built: list[str] = []

    class FakeImages(Images):
        def _plan_build(self, context: Path, dockerfile: str, build_args):  # type: ignore[no-untyped-def]
            tag = tags[int(context.name)]
            found = ImageInfo(tag, "") if tag in existing else None
            return BuildPlan(context, dockerfile, {}, tag, tag, existing=found)

        def _build(self, plan: BuildPlan, timeout: float, why: str) -> ImageInfo:
            built.append(plan.tag)
            return ImageInfo(plan.tag, "", built=True)

    async def scenario() -> list[ImageInfo]:
        images = FakeImages(Engine(), DockerOptions.parse({"builds": slots}))  # type: ignore[arg-type]
        specs = [EnvironmentSpec(build_context=f"/nonexistent/{i}") for i in range(n)]
        images.start(specs)
        return await asyncio.wait_for(asyncio.gather(*(images.image_for(s) for s in specs)), timeout=2)

    infos = asyncio.run(scenario())
    assert [info.ref for info in infos] == tags
    assert sorted(built) == sorted(set(tags) - existing)  # each missing tag built once


def test_a_build_cancelled_before_it_began_gives_up_its_turn() -> None:
    """A context's resolution cancelled before it ever ran still settles its turn: later builds go on."""
    class Engine:
        async def call(self, fn, *args):  # type: ignore[no-untyped-def]
            return fn(*args)

    class FakeImages(Images):
        def _plan_build(self, context, dockerfile, build_args):  # type: ignore[no-untyped-def]
            return BuildPlan(context, dockerfile, {}, context.name, context.name)

        def _build(self, plan, timeout, why):  # type: ignore[no-untyped-def]
            return ImageInfo(plan.tag, "", built=True)

    async def scenario() -> ImageInfo:
        images = FakeImages(Engine(), DockerOptions.parse({"builds": 1}))  # type: ignore[arg-type]
        first = images.image_for(EnvironmentSpec(build_context="/nonexistent/first"))
        first.cancel()  # before its first step: its coroutine never runs
        return await asyncio.wait_for(images.image_for(EnvironmentSpec(build_context="/nonexistent/second")), 5)

    assert asyncio.run(scenario()).ref == "second"
