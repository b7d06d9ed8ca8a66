"""The ``local`` environment: a working directory per task and real subprocesses on the host.

It isolates files (every path is confined to the task's working directory) and the process environment (a
child sees an explicit, small set of variables, never the host's wholesale), not the machine: use ``docker``
for untrusted code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from agentcompass.errors import InfrastructureError, UsageError
from agentcompass.runtime.environment import EnvironmentProvider, EnvironmentSession
from agentcompass.runtime.types import EnvironmentSpec, ExecResult

#: Host variables a child process inherits; everything else it gets is explicit.
INHERITED_VARIABLES = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT")
#: At most this many bytes of each output stream are kept.
OUTPUT_LIMIT = 8 * 1024 * 1024


class PathEscapeError(UsageError):
    """A path given to an environment leads outside its working directory."""


class _Capture:
    """Collects at most ``limit`` bytes of a stream; what was read survives cancellation."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.limit = limit

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            if self.size < self.limit:
                self.chunks.append(chunk[: self.limit - self.size])
            self.size += len(chunk)

    def text(self) -> str:
        data = b"".join(self.chunks)
        if self.size > self.limit:
            data += f"\n[... {self.size - self.limit} more bytes cut]".encode()
        return data.decode("utf-8", "replace")


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Wait for the process itself to exit. ``proc.wait()`` would also wait for every background child
    that inherited its pipes; the exit status is set as soon as the process is reaped."""
    delay = 0.001
    while proc.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


#: Seconds to wait for output after a command exited while its background children hold the pipes.
OUTPUT_GRACE = 0.5


class LocalSession(EnvironmentSession):
    def __init__(self, root: Path, base_env: Mapping[str, str], *, resolved: bool = False) -> None:
        self.root = root if resolved else root.resolve()
        self.workdir = str(self.root)
        self.base_env = dict(base_env)
        self._groups: set[int] = set()

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The host path of ``path``, which must stay inside the working directory."""
        candidate = (self.root / path).resolve()
        if candidate != self.root and not candidate.is_relative_to(self.root):
            raise PathEscapeError(f"path {str(path)!r} leads outside the task's working directory")
        return candidate

    async def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        if not argv:
            raise ValueError("exec needs a command")
        child_env = {**self.base_env, **(env or {})}
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=self.resolve(cwd) if cwd else self.root,
                env=child_env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group, so a timeout kills the whole tree
            )
        except FileNotFoundError:
            return ExecResult(returncode=127, stdout="", stderr=f"command not found: {argv[0]}")
        assert proc.stdout is not None and proc.stderr is not None
        self._groups.add(proc.pid)
        out, err = _Capture(), _Capture()
        readers = asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr))
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                await _exited(proc)
        except TimeoutError:
            timed_out = True
            _kill_group(proc.pid)
        except BaseException:  # cancelled: nothing of this command may outlive it
            _kill_group(proc.pid)
            readers.cancel()
            raise
        try:
            # Background children may keep the pipes open: they go on running (until the session closes),
            # but exec returns once the command itself is done.
            async with asyncio.timeout(OUTPUT_GRACE):
                await asyncio.shield(readers)
        except TimeoutError:
            readers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await readers
        if proc.returncode is None:
            await proc.wait()
        return ExecResult(
            returncode=proc.returncode if proc.returncode is not None else -9,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
        )

    def kill_all(self) -> None:
        """Kill every process group this session started (background children included)."""
        for pgid in self._groups:
            _kill_group(pgid)
        self._groups.clear()

    async def read_bytes(self, path: str) -> bytes:
        return await asyncio.to_thread(self.resolve(path).read_bytes)

    async def write_bytes(self, path: str, data: bytes) -> None:
        target = self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def upload(self, local_path: str | Path, path: str) -> None:
        source, target = Path(local_path), self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():  # noqa: ASYNC240 - one stat
            await asyncio.to_thread(shutil.copytree, source, target, dirs_exist_ok=True)
        else:
            await asyncio.to_thread(shutil.copy2, source, target)

    async def download(self, path: str, local_path: str | Path) -> None:
        source, target = self.resolve(path), Path(local_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            await asyncio.to_thread(shutil.copytree, source, target, dirs_exist_ok=True)
        else:
            await asyncio.to_thread(shutil.copy2, source, target)


def _make_run_root(base: Path, run_id: str) -> Path:
    """A fresh directory for a run's working directories, as a resolved path (sessions rely on it)."""
    base.mkdir(parents=True, exist_ok=True)
    return Path(os.path.realpath(tempfile.mkdtemp(prefix=f"agentcompass-{run_id[:12]}-", dir=base)))


class LocalProvider(EnvironmentProvider):
    """Opens :class:`LocalSession`\\ s under ``root`` (default: the system's temp directory).

    Options (``--env-arg``): ``root=DIR``; ``keep=true`` keeps working directories after the run.
    """

    name = "local"

    def __init__(self, root: str | None = None, keep: str | bool = False) -> None:
        self.root = Path(root) if root else None
        self.keep = str(keep).lower() in ("1", "true", "yes")
        self._run_root: Path | None = None
        self._remover = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentcompass-rm")
        self._removals: set[asyncio.Future[None]] = set()

    async def setup(self, specs: Iterable[EnvironmentSpec], *, run_id: str) -> None:
        self._run_root = _make_run_root(self.root or Path(tempfile.gettempdir()), run_id)

    async def open(
        self, spec: EnvironmentSpec, *, run_id: str, task_id: str, base_env: Mapping[str, str]
    ) -> LocalSession:
        if self._run_root is None:
            await self.setup((), run_id=run_id)
        assert self._run_root is not None
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)[:60]
        try:
            root = Path(tempfile.mkdtemp(prefix=f"{safe}-", dir=self._run_root))
        except OSError as exc:
            raise InfrastructureError(f"cannot create a working directory: {exc}") from exc
        env = {k: os.environ[k] for k in INHERITED_VARIABLES if k in os.environ}
        env.setdefault("PATH", os.defpath)
        env.update(HOME=str(root), TMPDIR=str(root), PYTHONDONTWRITEBYTECODE="1")
        env.update(base_env)
        env.update(spec.env)
        return LocalSession(root, env, resolved=True)  # made by mkdtemp under the resolved run root

    async def close(self, session: EnvironmentSession) -> None:
        if not isinstance(session, LocalSession):
            return
        session.kill_all()
        if not self.keep:
            # Removal runs on a thread of its own and is not awaited: closing stays cheap however large the
            # directory, and teardown waits for every removal.
            removal = asyncio.get_running_loop().run_in_executor(self._remover, shutil.rmtree, session.root, True)
            self._removals.add(removal)
            removal.add_done_callback(self._removals.discard)

    async def teardown(self) -> None:
        if self._removals:
            await asyncio.gather(*self._removals, return_exceptions=True)
            self._removals.clear()
        if self._run_root is not None and not self.keep:
            await asyncio.to_thread(shutil.rmtree, self._run_root, True)
        self._remover.shutdown(wait=False)
