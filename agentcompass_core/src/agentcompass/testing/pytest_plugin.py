"""The pytest plugin ``agentcompass`` (entry point ``pytest11``), installed with ``agentcompass-core``.

Fixtures (all function-scoped):

* ``agentcompass_host`` — the installed plugins (:func:`agentcompass.plugins.load_plugins`), for this test.
* ``agentcompass_register`` — ``register(plugin, name)`` adds a plugin object (a module or an object with
  hookimpls) to ``agentcompass_host`` for this test only; a failed registration fails the test with the
  plugin record's error.
* ``agentcompass_run`` — ``await agentcompass_run(benchmark, harness=None, model="mock", **options)``:
  :func:`agentcompass.testing.run_benchmark` on ``agentcompass_host``, with a run directory under
  ``tmp_path``.
* ``agentcompass_session`` — a live session of the ``local`` environment, closed after the test (an async
  fixture: needs pytest-asyncio).
* ``agentcompass_openai`` — a started :class:`agentcompass.testing.LoopbackOpenAI` (set ``.responder``).

Disable with ``-p no:agentcompass``. The module imports agentcompass only inside fixtures, so a plugin
suite that does not use them pays nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def agentcompass_host() -> Iterator[Any]:
    """The installed agentcompass plugins, loaded for this test."""
    from agentcompass.plugins import load_plugins

    yield load_plugins()


@pytest.fixture
def agentcompass_register(agentcompass_host: Any) -> Iterator[Callable[[object, str], Any]]:
    """``register(plugin, name) -> PluginRecord``: a plugin registered in ``agentcompass_host`` for this test
    only (unregistered at teardown, on every path)."""
    names: list[str] = []

    def register(plugin: object, name: str) -> Any:
        record = agentcompass_host.add_plugin(plugin, name)
        names.append(name)
        if record.error is not None:
            pytest.fail(f"plugin {name!r} failed to register: {record.error}", pytrace=False)
        return record

    try:
        yield register
    finally:
        for name in reversed(names):
            agentcompass_host.remove_plugin(name)


@pytest.fixture
def agentcompass_run(agentcompass_host: Any, tmp_path: Path) -> Callable[..., Awaitable[Any]]:
    """``await agentcompass_run(benchmark, harness=None, model="mock", **options)`` → a
    :class:`~agentcompass.testing.KitRun`, through the real lifecycle on ``agentcompass_host``."""
    from agentcompass.testing.runs import run_benchmark

    counter = itertools.count(1)

    async def run(benchmark: Any, harness: Any = None, model: Any = "mock", **options: Any) -> Any:
        options.setdefault("host", agentcompass_host)
        options.setdefault("run_dir", tmp_path / f"agentcompass-run-{next(counter)}")
        return await run_benchmark(benchmark, harness, model, **options)

    return run


@pytest.fixture
def agentcompass_openai() -> Iterator[Any]:
    """A started loopback OpenAI-compatible server answering like the ``mock`` model (set ``.responder``)."""
    from agentcompass.testing.scripted_models import LoopbackOpenAI

    with LoopbackOpenAI() as server:
        yield server


async def _local_session(agentcompass_host: Any) -> AsyncIterator[Any]:
    """A live session of the ``local`` environment, closed after the test."""
    from agentcompass.testing.sessions import open_session

    async with open_session("local", host=agentcompass_host) as session:
        yield session


def _session_fixture() -> Any:
    try:
        import pytest_asyncio
    except ImportError:  # pragma: no cover - an async fixture needs an asyncio runner

        @pytest.fixture(name="agentcompass_session")
        def missing() -> Any:
            """A live ``local`` session (needs pytest-asyncio: ``pip install agentcompass-core[testing]``)."""
            pytest.skip("the agentcompass_session fixture needs pytest-asyncio")

        return missing
    return pytest_asyncio.fixture(_local_session, name="agentcompass_session")


agentcompass_session = _session_fixture()
