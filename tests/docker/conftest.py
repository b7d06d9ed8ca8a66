"""Fixtures for the docker environment tests: real containers on this machine's engine, no mocks.

Every test here is marked ``docker``; those that need the engine skip (with the reason) when it does not
answer. Each ``provider`` gets a run id of its own and is torn down after the test, and the test then checks
that no container of its run is left.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import AsyncIterator, Callable

import pytest
from agentcompass.runtime import EnvironmentSpec

IMAGE = "python:3.11-slim"


@functools.cache
def engine_problem() -> str | None:
    """Why the docker tests cannot run here, or None."""
    try:
        from python_on_whales import docker

        docker.system.info()
    except Exception as exc:
        return f"no Docker engine answers `docker info` ({str(exc).strip().splitlines()[-1][:200]}); run ../shared/ci/docker-up.sh"
    try:
        docker.image.inspect(IMAGE)
    except Exception:
        return f"image {IMAGE} is missing; run ../shared/ci/docker-up.sh"
    return None


@pytest.fixture
def engine() -> None:
    problem = engine_problem()
    if problem:
        pytest.skip(problem)


def run_containers(run_id: str) -> list[str]:
    from python_on_whales import docker

    return [c.id for c in docker.container.list(all=True, filters=[("label", f"agentcompass.run_id={run_id}")])]


@pytest.fixture
def run_id() -> str:
    return f"test-{secrets.token_hex(4)}"


@pytest.fixture
async def make_provider(engine: None, run_id: str) -> AsyncIterator[Callable[..., object]]:
    """``make_provider(**options)``: a set-up DockerProvider for this test's run (torn down after it)."""
    from agentcompass_docker.provider import DockerProvider

    providers: list[DockerProvider] = []

    async def make(*specs: EnvironmentSpec, **options: str) -> DockerProvider:
        provider = DockerProvider(**options)
        await provider.setup(list(specs) or [EnvironmentSpec(image=IMAGE)], run_id=run_id)
        providers.append(provider)
        return provider

    yield make
    for provider in providers:
        await provider.teardown()
    if not any(p.options.keep for p in providers):
        assert run_containers(run_id) == [], "containers of the test's run are left after teardown"


@pytest.fixture
async def provider(make_provider):  # type: ignore[no-untyped-def]
    return await make_provider()


@pytest.fixture
async def session(provider, run_id):  # type: ignore[no-untyped-def]
    opened = await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id="task-1", base_env={})
    yield opened
    await provider.close(opened)
