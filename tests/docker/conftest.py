"""Fixtures for the docker environment tests: real containers on this machine's engine, no mocks.

Every test here is marked ``docker``; those that need the engine skip (with the reason) when it does not
answer: the decision is :func:`tests.helpers.docker_engine.engine_problem`, shared with the other suites. Each
``provider`` gets a run id of its own and is torn down after the test, and the test then checks that no
container of its run is left.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import pytest
from agentcompass.runtime import EnvironmentDemand, EnvironmentSpec

from tests.helpers.docker_engine import IMAGE, client, require_engine, run_containers

if TYPE_CHECKING:
    from python_on_whales import DockerClient


@pytest.fixture
def container_engine() -> str:
    """The engine the provider runs on (``--env-arg engine=``): ``docker``; a module that runs on Podman too
    overrides it (:data:`tests.helpers.docker_engine.ENGINES`)."""
    return "docker"


@pytest.fixture
def docker_available(container_engine: str) -> None:
    """Skips the test (with a one-line reason) unless the engine with the test image answers."""
    require_engine(container_engine)


@pytest.fixture
def cli(container_engine: str) -> DockerClient:
    """The test's own python-on-whales client, on the provider's engine (to look at what the provider made)."""
    return client(container_engine)


@pytest.fixture
def engine(docker_available: None) -> None:
    """The name the docker tests use for :func:`docker_available`."""


@pytest.fixture
def run_id() -> str:
    return f"test-{secrets.token_hex(4)}"


@pytest.fixture(params=["server", "docker"])
def exec_mode(request: pytest.FixtureRequest) -> str:
    """How sessions reach their containers (``--env-arg exec=``): every provider test runs on both paths."""
    return str(request.param)


@pytest.fixture
async def make_provider(
    engine: None, run_id: str, exec_mode: str, container_engine: str
) -> AsyncIterator[Callable[..., object]]:
    """``make_provider(*specs, concurrency=1, max_environments=None, **options)``: a set-up and planned
    DockerProvider for this test's run (torn down after it), on the test's exec path unless ``exec=`` is given."""
    from agentcompass_docker.provider import DockerProvider

    providers: list[DockerProvider] = []

    async def make(
        *specs: EnvironmentSpec, concurrency: int = 1, max_environments: int | None = None, **options: str
    ) -> DockerProvider:
        """Set up for ``specs`` (one open each, in order) and plan as the runner does (the demand: those
        opens, ``concurrency``, ``max_environments``)."""
        provider = DockerProvider(**{"exec": exec_mode, "engine": container_engine, **options})
        opens = list(specs) or [EnvironmentSpec(image=IMAGE)]
        await provider.setup(list({id(s): s for s in opens}.values()), run_id=run_id)
        await provider.plan(EnvironmentDemand(tuple(opens), concurrency=concurrency, max_environments=max_environments))
        providers.append(provider)
        return provider

    yield make
    for provider in providers:
        await provider.teardown()
    if not any(p.options.keep for p in providers):
        assert run_containers(run_id, container_engine) == [], "containers of the test's run are left after teardown"


@pytest.fixture
async def provider(make_provider):  # type: ignore[no-untyped-def]
    return await make_provider()


@pytest.fixture
async def session(provider, run_id):  # type: ignore[no-untyped-def]
    opened = await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id="task-1", base_env={})
    yield opened
    await provider.close(opened)
