"""Real environment sessions for unit tests of one phase, opened the way the runtime opens them.

``open_session`` gives one live session of a registered provider (``local`` by default) and closes it, and
the provider, on every path::

    async with open_session() as env:
        prepared = await bench.prepare_task(task, req, plan, env)

``environment_sessions`` is the same for tests that need several sessions of one provider.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentcompass.runtime.environment import EnvironmentProvider, EnvironmentSession, PruneReport
from agentcompass.runtime.types import EnvironmentSpec, ExecResult

TEST_RUN_ID = "agentcompass-test"


def make_provider(environment: Any = "local", *, host: Any = None, **options: Any) -> EnvironmentProvider:
    """A new provider: ``environment`` is a registered name (looked up in ``host``, default the installed
    plugins, and constructed with ``options`` as from ``--env-arg``), a class or factory, or an instance
    (returned as it is: an instance serves one setup/teardown cycle, as in a run)."""
    if isinstance(environment, EnvironmentProvider):
        if options:
            raise TypeError("options are for a provider the kit constructs, not for an instance")
        return environment
    if isinstance(environment, str):
        if host is None:
            from agentcompass.plugins import load_plugins

            host = load_plugins()
        factory = host.factory("environment", environment)
    elif callable(environment):
        factory = environment
    else:
        raise TypeError(f"not an environment provider, a name or a factory: {environment!r}")
    provider = factory(**options)
    if not isinstance(provider, EnvironmentProvider):
        raise TypeError(f"{environment!r} made {type(provider).__name__}, not an EnvironmentProvider")
    return provider


@attrs.define
class EnvironmentSessions:
    """Sessions of one provider, all closed (then the provider torn down) when the ``async with`` ends.
    Build it with :func:`environment_sessions`."""

    provider: EnvironmentProvider
    run_id: str = TEST_RUN_ID
    base_env: Mapping[str, str] = attrs.field(factory=dict)
    sessions: list[EnvironmentSession] = attrs.field(factory=list)
    _opened: int = 0

    async def open(self, spec: EnvironmentSpec | None = None, *, task_id: str | None = None,
                   base_env: Mapping[str, str] | None = None) -> EnvironmentSession:
        """Open one more session (closed with the others)."""
        n = self._opened
        self._opened += 1
        session = await self.provider.open(
            spec or EnvironmentSpec(), run_id=self.run_id, task_id=task_id or f"task-{n}",
            base_env={**self.base_env, **(base_env or {})},
        )
        self.sessions.append(session)
        return session

    async def close(self, session: EnvironmentSession) -> None:
        """Close one session now."""
        if session in self.sessions:
            self.sessions.remove(session)
            await self.provider.close(session)

    async def aclose(self) -> None:
        errors: list[BaseException] = []
        try:
            while self.sessions:
                try:
                    await self.provider.close(self.sessions.pop())
                except Exception as exc:
                    errors.append(exc)
        finally:
            await self.provider.teardown()
        if errors:
            raise errors[0]


@contextlib.asynccontextmanager
async def environment_sessions(
    environment: Any = "local",
    *,
    specs: Sequence[EnvironmentSpec] = (),
    host: Any = None,
    run_id: str = TEST_RUN_ID,
    base_env: Mapping[str, str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> AsyncIterator[EnvironmentSessions]:
    """A provider set up for ``specs`` (default: one default spec), opening sessions on demand::

        async with environment_sessions("local") as envs:
            a, b = await envs.open(), await envs.open()
    """
    provider = make_provider(environment, host=host, **dict(options or {}))
    await provider.setup(list(specs) or [EnvironmentSpec()], run_id=run_id)
    sessions = EnvironmentSessions(provider, run_id=run_id, base_env=dict(base_env or {}))
    try:
        yield sessions
    finally:
        await sessions.aclose()


@contextlib.asynccontextmanager
async def open_session(
    environment: Any = "local",
    *,
    spec: EnvironmentSpec | None = None,
    host: Any = None,
    run_id: str = TEST_RUN_ID,
    task_id: str = "task",
    base_env: Mapping[str, str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> AsyncIterator[EnvironmentSession]:
    """One live session of ``environment`` (default: the registered ``local`` provider), opened with
    ``provider.open(spec, run_id=..., task_id=..., base_env=...)`` and closed after, on every path.
    ``base_env`` is what the runtime would pass (e.g. a :class:`LoopbackOpenAI`'s ``env()``)."""
    spec = spec or EnvironmentSpec()
    async with environment_sessions(environment, specs=[spec], host=host, run_id=run_id, base_env=base_env,
                                    options=options) as sessions:
        yield await sessions.open(spec, task_id=task_id)


def local_session(**kwargs: Any) -> contextlib.AbstractAsyncContextManager[EnvironmentSession]:
    """``open_session("local", ...)``: a real working directory and real subprocesses on the host."""
    return open_session("local", **kwargs)


# -- recording what a run did in its environments ------------------------------------------------------


@attrs.frozen
class ExecCall:
    """One ``exec`` a recorded session ran."""

    task_id: str
    argv: list[str]
    cwd: str | None
    env: Mapping[str, str]
    timeout: float | None
    result: ExecResult | None


class RecordingSession(EnvironmentSession):
    """Delegates to a real session and records every ``exec`` and written path."""

    def __init__(self, inner: EnvironmentSession, task_id: str, recorder: RecordingProvider) -> None:
        self.inner = inner
        self.task_id = task_id
        self.recorder = recorder
        self.workdir = inner.workdir

    def __getattr__(self, name: str) -> Any:  # provider-specific extras (container ids, ...)
        return getattr(self.inner, name)

    async def exec(self, argv: Sequence[str], *, timeout: float | None = None,
                   env: Mapping[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        result: ExecResult | None = None
        try:
            result = await self.inner.exec(argv, timeout=timeout, env=env, cwd=cwd)
            return result
        finally:
            self.recorder.execs.append(ExecCall(self.task_id, list(argv), cwd, dict(env or {}), timeout, result))

    async def read_bytes(self, path: str) -> bytes:
        return await self.inner.read_bytes(path)

    async def write_bytes(self, path: str, data: bytes) -> None:
        await self.inner.write_bytes(path, data)
        self.recorder.writes.append((self.task_id, path))

    async def read_text(self, path: str) -> str:
        return await self.inner.read_text(path)

    async def write_text(self, path: str, text: str) -> None:
        await self.inner.write_text(path, text)
        self.recorder.writes.append((self.task_id, path))

    async def upload(self, local_path: str | Path, path: str) -> None:
        await self.inner.upload(local_path, path)
        self.recorder.writes.append((self.task_id, path))

    async def download(self, path: str, local_path: str | Path) -> None:
        await self.inner.download(path, local_path)


class RecordingProvider(EnvironmentProvider):
    """Wraps a provider and records what its sessions did: ``opened`` (task id, workdir), ``execs``
    (:class:`ExecCall`), ``writes`` (task id, path), ``closed`` (task ids). Pass it as ``environment=`` to
    :func:`~agentcompass.testing.run_benchmark` to see which commands a benchmark ran::

        spy = RecordingProvider(make_provider("local"))
        run = await run_benchmark(MyBenchmark, environment=spy)
        assert spy.execs[0].argv[:3] == ["python3", "-m", "my_runner"]
    """

    def __init__(self, inner: EnvironmentProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.opened: list[tuple[str, str]] = []
        self.closed: list[str] = []
        self.execs: list[ExecCall] = []
        self.writes: list[tuple[str, str]] = []

    async def setup(self, specs: Iterable[EnvironmentSpec], *, run_id: str) -> None:
        await self.inner.setup(specs, run_id=run_id)

    async def ready(self, spec: EnvironmentSpec) -> None:
        await self.inner.ready(spec)

    async def open(self, spec: EnvironmentSpec, *, run_id: str, task_id: str,
                   base_env: Mapping[str, str]) -> EnvironmentSession:
        session = await self.inner.open(spec, run_id=run_id, task_id=task_id, base_env=base_env)
        self.opened.append((task_id, session.workdir))
        return RecordingSession(session, task_id, self)

    async def close(self, session: EnvironmentSession) -> None:
        if isinstance(session, RecordingSession):
            self.closed.append(session.task_id)
            session = session.inner
        await self.inner.close(session)

    async def teardown(self) -> None:
        await self.inner.teardown()

    async def prune(self, run_id: str | None = None) -> int | PruneReport:
        return await self.inner.prune(run_id)

    def gateway_address(self, *, host: str, port: int, unix_socket: str) -> tuple[str, Mapping[str, str]]:
        return self.inner.gateway_address(host=host, port=port, unix_socket=unix_socket)

    def execs_of(self, task_id: str) -> list[ExecCall]:
        return [e for e in self.execs if e.task_id == task_id]
