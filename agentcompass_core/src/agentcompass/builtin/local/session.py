"""A local session: a working directory on the host and the commands run in it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from agentcompass.builtin.local import processes
from agentcompass.builtin.local.files import PathEscapeError, confine, copy_out, upload_into
from agentcompass.errors import InfrastructureError
from agentcompass.runtime.environment import OUTPUT_LIMIT, EnvironmentSession
from agentcompass.runtime.liveness import sign_of_life
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.shortening import shorten
from agentcompass.runtime.types import ExecResult

__all__ = ["KILL_TIMEOUT", "OUTPUT_GRACE", "LocalSession", "PathEscapeError"]

#: Seconds to wait for output after a command exited while its background children hold the pipes.
OUTPUT_GRACE = 0.5
#: Seconds killing a command's (or a session's) processes may take before they are reported as left over.
KILL_TIMEOUT = 10.0

log = get_logger(plugin="local")
_numbers = itertools.count(1)


class _Capture:
    """Collects at most ``limit`` bytes of a stream."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.limit = limit

    def add(self, chunk: bytes) -> None:
        if self.size < self.limit:
            self.chunks.append(chunk[: self.limit - self.size])
        self.size += len(chunk)

    def text(self) -> str:
        data = b"".join(self.chunks)
        if self.size > self.limit:
            data += f"\n[... {self.size - self.limit} more bytes cut]".encode()
        return data.decode("utf-8", "replace")


class _PipeReader:
    """Reads a pipe into a :class:`_Capture` with a reader callback on the loop: no task, no transport, and
    nothing left behind once :meth:`close` ran (it runs on every path of ``exec``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pipe: IO[bytes], capture: _Capture) -> None:
        self.loop, self.pipe, self.capture = loop, pipe, capture
        self.fd = pipe.fileno()
        self.done: asyncio.Future[None] = loop.create_future()
        self.closed = False
        os.set_blocking(self.fd, False)
        loop.add_reader(self.fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            sign_of_life("exec output")
            self.capture.add(chunk)
        else:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self.fd)
        self.pipe.close()
        if not self.done.done():
            self.done.set_result(None)


async def _exited(proc: subprocess.Popen[bytes]) -> None:
    """Wait for the process itself to exit and reap it (not for children that hold its pipes)."""
    if proc.poll() is not None:
        return
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:  # readable once the process exited
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await exited
        finally:
            loop.remove_reader(fd)
            os.close(fd)
    # Without a pidfd, poll; with one, the exit is there, unless another thread holds the Popen's lock.
    delay = 0.001
    while proc.poll() is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


class LocalSession(EnvironmentSession):
    """A working directory (every path stays inside it) and the processes run in it.

    Each ``exec`` is a :class:`~agentcompass.builtin.local.processes.ProcessTree`: a timeout kills that
    command's tree (``setsid`` included); :meth:`kill_all` (on close) kills what every command left running.
    """

    def __init__(self, root: Path, base_env: Mapping[str, str], *, resolved: bool = False,
                 cgroup: tuple[Path, str] | None = None) -> None:
        self.root = root if resolved else root.resolve()
        self.workdir = str(self.root)
        self.base_env = dict(base_env)
        self._trees: list[processes.ProcessTree] = []
        self._cgroup = cgroup
        self._number = next(_numbers)
        self._exec_numbers = itertools.count(1)
        self.closed = False

    # -- files ---------------------------------------------------------------------------------------

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The host path of ``path``, which must stay inside the working directory."""
        return confine(self.root, self.root / path, str(path))

    async def read_bytes(self, path: str) -> bytes:
        return await asyncio.to_thread(self.resolve(path).read_bytes)

    async def write_bytes(self, path: str, data: bytes) -> None:
        target = self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def upload(self, local_path: str | Path, path: str) -> None:
        await asyncio.to_thread(upload_into, Path(local_path), self.resolve(path))

    async def download(self, path: str, local_path: str | Path) -> None:
        """Copy ``path`` to the host. Symlinks in it are resolved (the copy holds their target's content); a
        symlink that leads outside the working directory, or into a loop, is a :class:`PathEscapeError`
        and nothing is copied."""
        await asyncio.to_thread(copy_out, self.root, self.resolve(path), Path(local_path))

    # -- processes -----------------------------------------------------------------------------------

    def _marker(self, number: int | None = None) -> str:
        return f"{self._number}.{number if number is not None else ''}:{self.workdir}"

    def _session_matches(self, value: str) -> bool:
        head, _, workdir = value.partition(":")
        return workdir == self.workdir and head.startswith(f"{self._number}.")

    def _new_tree(self) -> processes.ProcessTree:
        number = next(self._exec_numbers)
        tree = processes.ProcessTree(marker=self._marker(number))
        if self._cgroup is not None:
            directory, path = self._cgroup
            with contextlib.suppress(OSError):
                (directory / f"e{number}").mkdir(parents=True, exist_ok=True)
                tree.cgroup, tree.cgroup_path = directory / f"e{number}", f"{path}/e{number}"
        self._trees.append(tree)
        return tree

    @staticmethod
    def _release_cgroup(tree: processes.ProcessTree) -> None:
        """Remove a command's cgroup once nothing runs in it (its path still recognises its zombies)."""
        if tree.cgroup is not None and not processes.cgroup_populated(tree.cgroup):
            if processes.remove_cgroup(tree.cgroup):
                tree.cgroup = None

    def shell_command(self) -> list[str] | None:
        """An interactive ``bash`` (``sh`` without it) in the session's directory, with its environment."""
        shell = shutil.which("bash") or "/bin/sh"
        env = [f"{k}={v}" for k, v in self.base_env.items()]
        return ["env", "-C", str(self.root), *env, shell, *(["--noprofile", "--norc", "-i"] if "bash" in shell
                                                             else ["-i"])]

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
        if self.closed:
            raise InfrastructureError("exec on a closed local session")
        workdir = self.resolve(cwd) if cwd else self.root
        sign_of_life(f"exec {shorten(' '.join(argv), 120)}")
        tree = self._new_tree()
        child_env = {**self.base_env, **(env or {}), processes.MARKER: tree.marker}
        try:
            # Synchronous, like asyncio's own start-up, but with nothing to await before the pid is recorded.
            proc = subprocess.Popen(  # noqa: ASYNC220 - a fork and exec, as asyncio does it
                list(argv), cwd=workdir, env=child_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True, close_fds=True, preexec_fn=tree.preexec(),
            )
        except FileNotFoundError as exc:
            self._trees.remove(tree)
            if exc.filename is not None and str(exc.filename) == str(workdir):
                raise
            return ExecResult(returncode=127, stdout="", stderr=f"command not found: {argv[0]}")
        except PermissionError:
            self._trees.remove(tree)
            return ExecResult(returncode=126, stdout="", stderr=f"permission denied: {argv[0]}")
        tree.started(proc)
        assert proc.stdout is not None and proc.stderr is not None
        loop = asyncio.get_running_loop()
        out, err = _Capture(), _Capture()
        readers = (_PipeReader(loop, proc.stdout, out), _PipeReader(loop, proc.stderr, err))
        matches: Callable[[str], bool] = tree.marker.__eq__
        timed_out = False
        try:
            try:
                async with asyncio.timeout(timeout):
                    await _exited(proc)
            except TimeoutError:
                timed_out = True
                left = await asyncio.to_thread(processes.terminate_sync, [tree], matches, KILL_TIMEOUT)
                if left:
                    log.warning("local.exec_kill_incomplete", command=argv[0], left=left)
            # Background children may keep the pipes open: they go on running (until the session closes),
            # but exec returns once the command itself is done.
            pending = [r.done for r in readers if not r.done.done()]
            if pending:
                await asyncio.wait(pending, timeout=OUTPUT_GRACE)
            if proc.poll() is None:  # killed but not gone yet
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(KILL_TIMEOUT):
                        await _exited(proc)
        except BaseException:  # cancelled: nothing of this command may outlive it
            processes.kill_now([tree], matches)
            proc.poll()
            # The killed processes die in a moment; reap them then (plain callbacks: nothing to cancel).
            for delay in (0.05, 0.5, 2.0):
                loop.call_later(delay, processes.reap_adopted, [tree])
            raise
        finally:
            for reader in readers:
                reader.close()
        self._release_cgroup(tree)
        processes.reap_adopted(self._trees)
        return ExecResult(
            returncode=proc.returncode if proc.returncode is not None else -9,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
        )

    @property
    def ran_commands(self) -> bool:
        """Whether any ``exec`` of this session started a process."""
        return bool(self._trees)

    def kill_all(self) -> None:
        """Kill, without waiting, every process this session's commands started."""
        processes.kill_now(self._trees, self._session_matches)

    def terminate(self, timeout: float = KILL_TIMEOUT) -> int:
        """Kill and reap every process this session's commands started, and remove its cgroups; returns how
        many processes were left (blocking: run it in a thread)."""
        self.closed = True
        left = processes.terminate_sync(self._trees, self._session_matches, timeout)
        if self._cgroup is not None and not left:
            processes.remove_cgroup(self._cgroup[0])
        if left:
            log.warning("local.session_kill_incomplete", workdir=self.workdir, left=left)
        else:
            self._trees.clear()
        return left
