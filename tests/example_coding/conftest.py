"""Fixtures for the example_coding tests: real environment sessions and a stand-in for one task attempt.

Two session kinds back every environment-using test:

* ``tempdir`` — a minimal test-only :class:`EnvironmentSession` over a temporary directory with real
  subprocesses, independent of the core's own environments;
* ``local`` — the core's ``local`` environment (``agentcompass.builtin.local_env``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import pytest
from agentcompass.runtime import (
    EnvironmentSession,
    EnvironmentSpec,
    ExecResult,
    ExecutionPlan,
    RunResult,
    TaskSpec,
)
from agentcompass_example_coding.benchmark import ExampleCodingBenchmark
from ec_support import REQUEST, Act


class TempDirSession(EnvironmentSession):
    """The smallest honest session: a directory, relative paths against it, subprocesses in their own
    process group that a timeout kills whole."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workdir = str(root)

    def _path(self, path: str | os.PathLike[str]) -> Path:
        return self.root / path

    async def exec(  # the signature is the EnvironmentSession contract's
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=self._path(cwd) if cwd else self.root,
            env={**os.environ, **(env or {})},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = await proc.communicate()
            return ExecResult(-9, stdout.decode(errors="replace"), stderr.decode(errors="replace"), True)
        assert proc.returncode is not None
        return ExecResult(proc.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace"))

    async def read_bytes(self, path: str) -> bytes:
        return self._path(path).read_bytes()

    async def write_bytes(self, path: str, data: bytes) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def upload(self, local_path: str | Path, path: str) -> None:
        _copy(Path(local_path), self._path(path))

    async def download(self, path: str, local_path: str | Path) -> None:
        _copy(self._path(path), Path(local_path))


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target)


OpenEnv = Callable[[], Awaitable[EnvironmentSession]]


@pytest.fixture(params=["tempdir", "local"])
async def open_env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenEnv]:
    """An async callable that opens a new session of the parametrized kind; all are closed at teardown."""
    if request.param == "tempdir":

        async def open_tempdir() -> EnvironmentSession:
            return TempDirSession(Path(tempfile.mkdtemp(prefix="env-", dir=tmp_path)))

        yield open_tempdir
        return

    local_env = pytest.importorskip("agentcompass.builtin.local_env")
    provider = local_env.LocalProvider(root=str(tmp_path / "local"))
    await provider.setup([EnvironmentSpec()], run_id="example-coding-test")
    sessions: list[EnvironmentSession] = []

    async def open_local() -> EnvironmentSession:
        session = await provider.open(
            EnvironmentSpec(), run_id="example-coding-test", task_id=f"t{len(sessions)}", base_env={}
        )
        sessions.append(session)
        return session

    try:
        yield open_local
    finally:
        for session in sessions:
            await provider.close(session)
        await provider.teardown()


@pytest.fixture
def attempt(open_env: OpenEnv, tmp_path: Path) -> Callable[..., Awaitable[RunResult]]:
    """``await attempt(bench, task, act)`` runs one task attempt the way the runtime does for a ``fresh``
    benchmark: prepare, act (standing in for the harness), collect in one environment; then evaluate in a new
    one holding the files of ``plan.artifacts_dir`` under ``artifacts/``."""
    counter = iter(range(1_000_000))

    async def run(bench: ExampleCodingBenchmark, task: TaskSpec, act: Act) -> RunResult:
        artifacts_dir = tmp_path / f"artifacts-{next(counter)}"
        plan = ExecutionPlan(
            run_id="example-coding-test",
            task_id=task.task_id,
            harness="test",
            artifacts_dir=str(artifacts_dir),
        )
        env = await open_env()
        prepared = await bench.prepare_task(task, REQUEST, plan, env)
        result = await act(task, prepared, plan, env)
        result = await bench.collect_artifacts(task, prepared, result, REQUEST, plan, env)
        eval_env = await open_env()
        if artifacts_dir.is_dir():
            await eval_env.upload(artifacts_dir, "artifacts")
        return await bench.evaluate(task, prepared, result, REQUEST, plan, eval_env)

    return run
