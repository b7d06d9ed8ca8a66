"""The ``local`` environment: a working directory per task and real subprocesses on the host.

It isolates files (every path is confined to the task's working directory) and the process environment (a
child sees an explicit, small set of variables, never the host's wholesale), not the machine: use ``docker``
for untrusted code.
"""

from __future__ import annotations

import asyncio
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


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(65536):
        if size < limit:
            chunks.append(chunk[: limit - size])
        size += len(chunk)
    data = b"".join(chunks)
    if size > limit:
        data += f"\n[... {size - limit} more bytes cut]".encode()
    return data


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class LocalSession(EnvironmentSession):
    def __init__(self, root: Path, base_env: Mapping[str, str]) -> None:
        self.root = root.resolve()
        self.workdir = str(self.root)
        self.base_env = dict(base_env)

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
        readers = asyncio.gather(
            _read_capped(proc.stdout, OUTPUT_LIMIT), _read_capped(proc.stderr, OUTPUT_LIMIT)
        )
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                await proc.wait()
        except TimeoutError:
            timed_out = True
        finally:
            # Kill the group on timeout and on cancellation; on a normal exit, stray children that
            # still hold the pipes open die too, so the readers below finish.
            _kill_group(proc.pid)
        if proc.returncode is None:
            await proc.wait()
        stdout, stderr = await readers
        return ExecResult(
            returncode=proc.returncode if proc.returncode is not None else -9,
            stdout=stdout.decode("utf-8", "replace"),
            stderr=stderr.decode("utf-8", "replace"),
            timed_out=timed_out,
        )

    async def read_bytes(self, path: str) -> bytes:
        return await asyncio.to_thread(self.resolve(path).read_bytes)

    async def write_bytes(self, path: str, data: bytes) -> None:
        target = self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def upload(self, local_path: str | Path, path: str) -> None:
        source, target = Path(local_path), self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
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


class LocalProvider(EnvironmentProvider):
    """Opens :class:`LocalSession`\\ s under ``root`` (default: the system's temp directory).

    Options (``--env-arg``): ``root=DIR``; ``keep=true`` keeps working directories after the run.
    """

    name = "local"

    def __init__(self, root: str | None = None, keep: str | bool = False) -> None:
        self.root = Path(root) if root else None
        self.keep = str(keep).lower() in ("1", "true", "yes")
        self._run_root: Path | None = None

    async def setup(self, specs: Iterable[EnvironmentSpec], *, run_id: str) -> None:
        base = self.root or Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        self._run_root = Path(tempfile.mkdtemp(prefix=f"agentcompass-{run_id[:12]}-", dir=base))

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
        return LocalSession(root, env)

    async def close(self, session: EnvironmentSession) -> None:
        if not self.keep and isinstance(session, LocalSession):
            await asyncio.to_thread(shutil.rmtree, session.root, True)

    async def teardown(self) -> None:
        if self._run_root is not None and not self.keep:
            await asyncio.to_thread(shutil.rmtree, self._run_root, True)
