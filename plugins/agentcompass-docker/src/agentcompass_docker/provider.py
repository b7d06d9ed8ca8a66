"""The ``docker`` environment: one isolated container per task attempt, driven through python-on-whales.

python-on-whales is synchronous (it runs the docker CLI), so every call runs in the provider's own thread
pool and the event loop never blocks. Per task attempt the engine sees: ``create`` + ``start`` on open, one
``exec`` per command, file read or download (small writes ride along with the next of those), ``rm -f`` on
close.

Isolation defaults: no network, memory/CPU/process limits from the spec, every capability dropped,
``no-new-privileges``, never privileged, ``docker-init`` as PID 1.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import hashlib
import io
import logging
import os
import posixpath
import re
import secrets
import tarfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar, cast

from agentcompass.errors import EnvironmentUnavailable, InfrastructureError
from agentcompass.runtime.environment import EnvironmentProvider, EnvironmentSession
from agentcompass.runtime.types import EnvironmentSpec, ExecResult
from python_on_whales import DockerClient
from python_on_whales.client_config import ClientNotFoundError
from python_on_whales.exceptions import DockerException, NoSuchContainer, NoSuchImage
from python_on_whales.utils import run as _docker_run

from agentcompass_docker import _scripts
from agentcompass_docker.options import DockerOptions

log = logging.getLogger("agentcompass.docker")

T = TypeVar("T")

LABEL_MANAGED = "agentcompass.managed"
LABEL_RUN = "agentcompass.run_id"
LABEL_TASK = "agentcompass.task_id"
BUILD_REPOSITORY = "agentcompass-build"

#: At most this many bytes of each output stream of an ``exec`` are kept (as in the local environment).
OUTPUT_LIMIT = 8 * 1024 * 1024
#: Writes up to this size are batched into the next docker call; larger ones go at once.
BATCH_FILE_LIMIT = 64 * 1024
#: A batch is sent as soon as it holds this many bytes.
BATCH_TOTAL_LIMIT = 256 * 1024
#: How long a timed-out ``exec`` may take to return once its processes are killed.
KILL_GRACE = 5.0
#: How long a cancelled ``exec``'s processes are hunted in the background.
CANCEL_KILL_WINDOW = 30.0
#: The engine must answer ``docker info`` within this many seconds.
ENGINE_CHECK_TIMEOUT = 30.0

START_HINT = (
    "start one by starting dockerd (e.g. `sudo systemctl start docker`; in this repository's CI: run "
    "../shared/ci/docker-up.sh as root), and check DOCKER_HOST (or --env-arg host=URL)"
)


def _is_root(user: str) -> bool:
    return user.split(":", 1)[0] in ("", "0", "root")


def _slug(text: str, size: int) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-.")[:size] or "x"


def _detail(exc: BaseException) -> str:
    """The useful part of a python-on-whales error: the docker CLI's last stderr line."""
    stderr = getattr(exc, "stderr", None)
    if stderr:
        lines = [line.strip() for line in str(stderr).strip().splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


_GONE = ("no such container", "is not running", "is restarting", "is paused", "marked for removal")


def _container_gone(message: str) -> bool:
    lowered = message.lower()
    return any(marker in lowered for marker in _GONE)


def _file_error(path: str, stderr: str) -> OSError:
    message = stderr.strip() or f"cannot access {path}"
    if "No such file" in message or "Cannot stat" in message:
        return FileNotFoundError(errno.ENOENT, message, path)
    if "Is a directory" in message:
        return IsADirectoryError(errno.EISDIR, message, path)
    if "Permission denied" in message or "Read-only file system" in message:
        return PermissionError(errno.EACCES, message, path)
    return OSError(errno.EIO, message, path)


def context_hash(context: Path, dockerfile: str) -> str:
    """A content hash of a build context: paths, kinds, executable bits, symlink targets, file bytes."""
    digest = hashlib.sha256(b"agentcompass-build-v1\0" + dockerfile.encode() + b"\0")
    for root, dirs, files in os.walk(context):
        dirs.sort()
        for name in sorted(dirs + files):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, context).replace(os.sep, "/")
            if os.path.islink(full):
                digest.update(b"L" + rel.encode() + b"\0" + os.readlink(full).encode() + b"\0")
            elif os.path.isdir(full):
                digest.update(b"D" + rel.encode() + b"\0")
            else:
                mode = b"x" if os.access(full, os.X_OK) else b"-"
                digest.update(b"F" + rel.encode() + b"\0" + mode)
                with open(full, "rb") as f:
                    digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()


@dataclass(frozen=True)
class ImageInfo:
    """A resolved image: what to run and the user its configuration names."""

    ref: str
    user: str
    built: bool = False


# -- tar helpers (host side) -------------------------------------------------------------------------


def _tar_for_upload(source: Path, target: str) -> tuple[str, bytes]:
    """Where to extract, and a tar that puts ``source`` at the container path ``target`` there: for a
    directory, its children (extracted into ``target``); for a file, one member named after ``target``
    (extracted into its directory). Ownership is reset: files belong to whoever extracts them."""
    if not source.exists():
        raise FileNotFoundError(errno.ENOENT, "no such file or directory", str(source))

    def reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directory = target
        if source.is_dir():
            for child in sorted(source.iterdir()):
                tar.add(child, arcname=child.name, filter=reset)
        else:
            directory = posixpath.dirname(target) or "/"
            tar.add(source, arcname=posixpath.basename(target), filter=reset)
    return directory, buffer.getvalue()


def _extract_download(data: bytes, top: str, dest: Path) -> None:
    """Unpack the tar ``TAR_OUT`` made of ``top`` so that ``top`` itself becomes ``dest``. Members that
    would land outside ``dest`` (absolute, ``..``, through a symlink) are refused."""
    dest = Path(dest)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        if not members:
            raise OSError(errno.EIO, "empty archive from the container", top)
        root = members[0]
        if root.name.rstrip("/") == top and not root.isdir():
            dest.parent.mkdir(parents=True, exist_ok=True)
            _extract_file(tar, root, dest)
            return
        dest.mkdir(parents=True, exist_ok=True)
        real_root = os.path.realpath(dest)
        for member in members:
            parts = PurePosixPath(member.name).parts
            if not parts or parts[0] != top or len(parts) == 1:
                continue
            rel = parts[1:]
            if any(p in ("..", "") or p.startswith("/") for p in rel):
                raise OSError(errno.EPERM, f"unsafe path in archive: {member.name}", str(dest))
            target = dest.joinpath(*rel)
            parent = os.path.realpath(target.parent)
            if parent != real_root and not parent.startswith(real_root + os.sep):
                raise OSError(errno.EPERM, f"archive member leads outside: {member.name}", str(dest))
            if member.isdir():
                if target.is_symlink():
                    target.unlink()
                target.mkdir(parents=True, exist_ok=True)
            elif member.issym():
                if target.is_symlink() or target.exists():
                    target.unlink()
                os.symlink(member.linkname, target)
            elif member.isfile() or member.islnk():
                _extract_file(tar, member, target)


def _extract_file(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    source = tar.extractfile(member)
    if source is None:
        return
    if target.is_symlink():
        target.unlink()
    with source, open(target, "wb") as out:
        while chunk := source.read(1 << 20):
            out.write(chunk)
    os.chmod(target, (member.mode & 0o777) | 0o600)


# -- the session ---------------------------------------------------------------------------------------


class _ExecOutput:
    """Collects an ``exec``'s output in the worker thread and picks out the wrapper's marker lines."""

    def __init__(self, marker: bytes, on_landed: Callable[[], None]) -> None:
        self.marker = marker
        self.on_landed = on_landed
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.cut = {"stdout": 0, "stderr": 0}
        self.trailer: list[bytes] | None = None
        self.write_failed = False

    def feed(self, source: str, chunk: bytes) -> None:
        if source == "stderr":
            at = chunk.find(self.marker)
            if at >= 0:
                fields = chunk[at + len(self.marker) :].split()
                chunk = chunk[:at]
                kind = fields[0] if fields else b""
                if kind == b"R":
                    self.on_landed()
                elif kind == b"W":
                    self.write_failed = True
                elif kind == b"X":
                    self.trailer = fields[1:]
        buffer = self.stdout if source == "stdout" else self.stderr
        room = OUTPUT_LIMIT - len(buffer)
        if room >= len(chunk):
            buffer.extend(chunk)
        else:
            buffer.extend(chunk[: max(room, 0)])
            self.cut[source] += len(chunk) - max(room, 0)

    def text(self, source: str) -> str:
        data = bytes(self.stdout if source == "stdout" else self.stderr)
        if self.cut[source]:
            data += f"\n[... {self.cut[source]} more bytes cut]".encode()
        return data.decode("utf-8", "replace")


class DockerSession(EnvironmentSession):
    """One running container. Created by :meth:`DockerProvider.open` only."""

    def __init__(
        self,
        provider: DockerProvider,
        *,
        container_id: str,
        name: str,
        spec: EnvironmentSpec,
        user: str,
        memory: str,
        task_id: str,
        forward_port: int | None,
    ) -> None:
        self.provider = provider
        self.container_id = container_id
        self.name = name
        self.spec = spec
        self.workdir = spec.workdir
        self.user = user
        self.memory = memory
        self.task_id = task_id
        self.closed = False
        self._forward_port = forward_port  # cleared once the forwarder is known to listen
        self._pending: list[tuple[str, bytes]] = []
        self._pending_size = 0
        self._landed: asyncio.Future[None] | None = None
        self._write_error: BaseException | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        self._close_future: asyncio.Future[Any] | None = None

    def __repr__(self) -> str:
        return f"DockerSession({self.name!r}, task_id={self.task_id!r})"

    def path(self, path: str) -> str:
        """The absolute container path of ``path`` (relative paths resolve against the workdir)."""
        return posixpath.normpath(posixpath.join(self.workdir, str(path)))

    # -- batched writes --------------------------------------------------------------------------------

    async def _take_writes(self) -> tuple[list[str], asyncio.Future[None] | None]:
        """Hand the pending writes to the caller's docker call, as ``NWRITES [PATH B64]...`` arguments.

        Earlier batches land first. The caller resolves the returned future once the writes have landed
        (or failed), so that later operations wait for them.
        """
        if self.closed:
            raise InfrastructureError(f"the container of task {self.task_id!r} is closed")
        if self._landed is not None and not self._landed.done():
            await asyncio.shield(self._landed)
        if self._write_error is not None:
            error, self._write_error = self._write_error, None
            raise error
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return ["0"], None
        args = [str(len(self._pending))]
        for path, data in self._pending:
            args += [path, base64.b64encode(data).decode("ascii")]
        self._pending, self._pending_size = [], 0
        landed = asyncio.get_running_loop().create_future()
        self._landed = landed
        return args, landed

    @staticmethod
    def _resolve(landed: asyncio.Future[None] | None) -> None:
        if landed is not None and not landed.done():
            landed.set_result(None)

    def _flush_later(self) -> None:
        delay = self.provider.options.write_delay
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(delay, self._start_flush)

    def _start_flush(self) -> None:
        self._timer = None
        task = asyncio.ensure_future(self._flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _flush(self) -> None:
        """Send pending writes on their own; an error is raised by the session's next operation."""
        try:
            args, landed = await self._take_writes()
        except Exception as exc:  # an earlier error: keep it for the next operation
            self._write_error = exc
            return
        if landed is None:
            return
        try:
            _, err, rc = await self.provider._call(self._capture, ["sh", "-c", _scripts.PUTS, "ac-write", *args])
            if rc != 0:
                self._write_error = _file_error("(batched write)", err)
        except Exception as exc:
            self._write_error = exc
        finally:
            self._resolve(landed)

    # -- docker calls (worker threads) -----------------------------------------------------------------

    def _capture(self, argv: Sequence[str], user: str | None = None) -> tuple[bytes, str, int]:
        """Run ``argv`` in the container; return (stdout bytes, stderr text, exit status)."""
        out, err = bytearray(), bytearray()
        rc = 0
        try:
            for source, chunk in self.provider.exec_stream(self.container_id, argv, user=user or self.user):
                (out if source == "stdout" else err).extend(chunk)
        except DockerException as exc:
            rc = exc.return_code or 1
        except UnicodeDecodeError:  # python-on-whales decodes stderr to classify a failure
            rc = 1
        text = bytes(err).decode("utf-8", "replace")
        if rc and _container_gone(text):
            raise InfrastructureError(f"the container of task {self.task_id!r} is gone: {text.strip()}")
        return bytes(out), text, rc

    def _stdin(self, argv: Sequence[str], data: bytes) -> None:
        """Run ``argv`` in the container with ``data`` on its stdin.

        python-on-whales's ``execute`` cannot feed stdin, so this goes through its own runner
        (``python_on_whales.utils.run``) with the client's configured docker command.
        """
        docker_cmd = self.provider.docker.client_config.docker_cmd
        command = [*docker_cmd, "exec", "--interactive", "--user", self.user, self.container_id, *argv]
        try:
            _docker_run(command, input=data)
        except DockerException as exc:
            message = exc.stderr or ""
            if _container_gone(message):
                raise InfrastructureError(f"the container of task {self.task_id!r} is gone: {message}") from None
            raise _file_error(str(argv[-1]), message) from None

    # -- EnvironmentSession ------------------------------------------------------------------------------

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
        loop = asyncio.get_running_loop()
        exec_id = secrets.token_hex(16)
        marker = secrets.token_hex(16)
        port = f"{self._forward_port:04X}" if self._forward_port else ""
        envs = {**(env or {}), _scripts.EXEC_ID_VARIABLE: exec_id}
        workdir = self.path(cwd) if cwd else self.workdir
        landed: asyncio.Future[None] | None = None

        def on_landed() -> None:
            if landed is not None:
                loop.call_soon_threadsafe(self._resolve, landed)

        output = _ExecOutput(b"\x1e" + marker.encode(), on_landed)

        def run(command: list[str]) -> int | None:
            try:
                stream = self.provider.exec_stream(
                    self.container_id, command, envs=envs, user=self.user, workdir=workdir
                )
                for source, chunk in stream:
                    output.feed(source, chunk)
                return 0
            except DockerException as exc:
                return exc.return_code
            except UnicodeDecodeError:  # python-on-whales decodes stderr to classify a failure
                return None

        timed_out = False
        docker_rc: int | None = None
        writes, landed = await self._take_writes()
        try:
            command = ["sh", "-c", _scripts.EXEC_WRAPPER, "ac-exec", marker, port, *writes, *argv]
            call = self.provider._submit(run, command)
            future = asyncio.wrap_future(call)
            try:
                docker_rc = await asyncio.wait_for(asyncio.shield(future), timeout)
            except TimeoutError:
                timed_out = True
                await asyncio.wrap_future(self.provider._submit(self._kill_until_returned, exec_id, call, KILL_GRACE))
                if future.done():
                    docker_rc = future.result()
            except asyncio.CancelledError:
                if not self.closed:  # the caller gave up: stop the processes too, without waiting
                    self.provider._submit(self._kill_until_returned, exec_id, call, CANCEL_KILL_WINDOW)
                raise
        finally:
            self._resolve(landed)
        if port:
            self._forward_port = None  # the forwarder was waited for once; later execs skip the check
        return self._exec_result(output, timed_out, docker_rc)

    def _exec_result(self, output: _ExecOutput, timed_out: bool, docker_rc: int | None) -> ExecResult:
        stdout, stderr = output.text("stdout"), output.text("stderr")
        if output.write_failed:
            raise _file_error("(batched write)", stderr)
        if timed_out:
            return ExecResult(returncode=-9, stdout=stdout, stderr=stderr, timed_out=True)
        if output.trailer is None:
            # The wrapper did not finish: the engine could not run it (or it was killed from outside).
            if _container_gone(stderr):
                raise InfrastructureError(f"the container of task {self.task_id!r} is gone: {stderr.strip()}")
            return ExecResult(returncode=docker_rc or -1, stdout=stdout, stderr=stderr)
        status, oom_before, oom_after = [*output.trailer, b"-", b"-", b"-"][:3]
        returncode = int(status) if status.isdigit() else -1
        if oom_before.isdigit() and oom_after.isdigit() and int(oom_after) > int(oom_before):
            if returncode == 137:  # SIGKILL, as the shell reports it
                returncode = -9
            sep = "" if not stderr or stderr.endswith("\n") else "\n"
            stderr += f"{sep}killed: out of memory (limit {self.memory})\n"
        return ExecResult(returncode=returncode, stdout=stdout, stderr=stderr)

    def _kill_until_returned(self, exec_id: str, call: Future[Any], seconds: float) -> None:
        """SIGKILL the processes of one ``exec`` until its ``docker exec`` returns, for at most ``seconds``.
        Repeating covers a process the engine starts only after the first pass."""
        deadline = time.monotonic() + seconds
        while True:
            with contextlib.suppress(Exception):
                self.provider.docker.container.execute(
                    self.container_id, ["sh", "-c", _scripts.KILL_TREE, "ac-kill", exec_id], user=self.user
                )
            with contextlib.suppress(Exception):
                call.result(timeout=min(0.5, max(0.0, deadline - time.monotonic())))
            if call.done() or time.monotonic() >= deadline or self.closed:
                return

    async def read_bytes(self, path: str) -> bytes:
        target = self.path(path)
        writes, landed = await self._take_writes()
        try:
            out, err, rc = await self.provider._call(
                self._capture, ["sh", "-c", _scripts.READ, "ac-read", *writes, target]
            )
        finally:
            self._resolve(landed)
        if rc:
            raise _file_error(target, err)
        return out

    async def write_bytes(self, path: str, data: bytes) -> None:
        target = self.path(path)
        data = bytes(data)
        if self.provider.options.write_delay > 0 and len(data) <= BATCH_FILE_LIMIT:
            if self.closed:
                raise InfrastructureError(f"the container of task {self.task_id!r} is closed")
            self._pending.append((target, data))
            self._pending_size += len(data)
            if self._pending_size >= BATCH_TOTAL_LIMIT:
                await self._flush()
                if self._write_error is not None:
                    error, self._write_error = self._write_error, None
                    raise error
            else:
                self._flush_later()
            return
        writes, landed = await self._take_writes()
        try:
            await self.provider._call(self._stdin, ["sh", "-c", _scripts.WRITE, "ac-write", *writes, target], data)
        finally:
            self._resolve(landed)

    async def upload(self, local_path: str | Path, path: str) -> None:
        target = self.path(path)
        directory, data = await asyncio.to_thread(_tar_for_upload, Path(local_path), target)
        writes, landed = await self._take_writes()
        try:
            await self.provider._call(
                self._stdin,
                ["sh", "-c", _scripts.UNTAR, "ac-upload", *writes, directory],
                data,
            )
        finally:
            self._resolve(landed)

    async def download(self, path: str, local_path: str | Path) -> None:
        target = self.path(path)
        if target == "/":
            raise ValueError("cannot download the container's root directory")
        writes, landed = await self._take_writes()
        try:
            out, err, rc = await self.provider._call(
                self._capture, ["sh", "-c", _scripts.TAR_OUT, "ac-download", *writes, target]
            )
        finally:
            self._resolve(landed)
        if rc:
            raise _file_error(target, err)
        await asyncio.to_thread(_extract_download, out, posixpath.basename(target), Path(local_path))

    def _shutdown(self) -> None:
        """Forget pending work: the container is going away."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending.clear()
        for task in list(self._flushes):
            task.cancel()


# -- the provider --------------------------------------------------------------------------------------


class DockerProvider(EnvironmentProvider):
    """Docker containers as task environments. See the package README for options and defaults."""

    name = "docker"

    def __init__(self, **options: Any) -> None:
        self.options = DockerOptions.parse(options)
        self.docker = DockerClient(host=self.options.host, context=self.options.context)
        self.run_id = ""
        #: Images this provider built (not found by tag); tests and logs read it.
        self.builds = 0
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._images: dict[tuple[str, ...], asyncio.Future[ImageInfo]] = {}
        self._sessions: dict[str, DockerSession] = {}
        self._starting: set[asyncio.Future[Any]] = set()
        self._closing: set[asyncio.Future[Any]] = set()
        self._gateway: tuple[str, int] | None = None

    # -- threads ---------------------------------------------------------------------------------------

    def _submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.options.threads, thread_name_prefix="agentcompass-docker")
            return self._pool.submit(fn, *args, **kwargs)

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.wrap_future(self._submit(fn, *args, **kwargs))

    def exec_stream(self, container: str, argv: Sequence[str], **kwargs: Any) -> Iterator[tuple[str, bytes]]:
        """``docker exec`` with its output as raw ``("stdout"|"stderr", bytes)`` pieces, as they come. A
        non-zero exit raises :class:`DockerException` at the end. Blocking: worker threads only."""
        stream = self.docker.container.execute(container, list(argv), stream=True, **kwargs)
        return cast(Iterator[tuple[str, bytes]], stream)

    # -- run set-up ------------------------------------------------------------------------------------

    async def setup(self, specs: Iterable[EnvironmentSpec], *, run_id: str) -> None:
        self.run_id = run_id
        await self.check_engine()
        await asyncio.gather(*(self.image_for(spec) for spec in list(specs)))

    async def check_engine(self) -> None:
        """Raise :class:`EnvironmentUnavailable` unless the engine answers."""
        try:
            await asyncio.wait_for(self._call(self._ping), ENGINE_CHECK_TIMEOUT)
        except TimeoutError:
            raise EnvironmentUnavailable(
                f"the Docker engine did not answer within {ENGINE_CHECK_TIMEOUT:.0f} s; {START_HINT}."
            ) from None

    def _ping(self) -> None:
        try:
            self.docker.system.info()
        except (DockerException, ClientNotFoundError) as exc:
            raise EnvironmentUnavailable(f"no Docker engine answers ({_detail(exc)}); {START_HINT}.") from None
        except Exception as exc:  # an answer python-on-whales cannot parse is still an answer
            log.debug("docker info answered but did not parse: %s", str(exc)[:200])

    def image_for(self, spec: EnvironmentSpec) -> asyncio.Future[ImageInfo]:
        """The image a spec runs, resolved once per provider (a build runs once however many ask)."""
        if spec.build_context:
            context = str(Path(spec.build_context).resolve())
            key: tuple[str, ...] = ("build", context, spec.dockerfile)
        else:
            key = ("image", spec.image)
        future = self._images.get(key)
        if future is None:
            if key[0] == "build":
                work = self._within(
                    self._call(self._build, Path(key[1]), key[2]),
                    self.options.build_timeout,
                    f"building the image from {key[1]}",
                )
            else:
                work = self._within(
                    self._call(self._resolve_image, spec.image),
                    self.options.pull_timeout,
                    f"pulling image {spec.image!r}",
                )
            future = asyncio.ensure_future(work)
            self._images[key] = future
        return future

    @staticmethod
    async def _within(work: Any, seconds: float, what: str) -> Any:
        try:
            return await asyncio.wait_for(work, seconds)
        except TimeoutError:
            raise EnvironmentUnavailable(f"{what} took longer than {seconds:.0f} s") from None

    def _resolve_image(self, ref: str) -> ImageInfo:
        try:
            image = self.docker.image.inspect(ref)
        except NoSuchImage:
            if not self.options.pull:
                raise EnvironmentUnavailable(f"image {ref!r} is not available locally (pulling is off)") from None
            try:
                self.docker.image.pull(ref, quiet=True)
                image = self.docker.image.inspect(ref)
            except DockerException as exc:
                raise EnvironmentUnavailable(
                    f"image {ref!r} is not available locally and cannot be pulled: {_detail(exc)}"
                ) from None
        except DockerException as exc:
            raise EnvironmentUnavailable(f"cannot inspect image {ref!r}: {_detail(exc)}") from None
        return ImageInfo(ref, image.config.user or "")

    def _build(self, context: Path, dockerfile: str) -> ImageInfo:
        if not (context / dockerfile).is_file():
            raise EnvironmentUnavailable(f"no {dockerfile} in build context {context}")
        digest = context_hash(context, dockerfile)
        tag = f"{BUILD_REPOSITORY}:{digest[:32]}"
        try:
            image = self.docker.image.inspect(tag)
            return ImageInfo(tag, image.config.user or "")
        except NoSuchImage:
            pass
        except DockerException as exc:
            raise EnvironmentUnavailable(f"cannot inspect image {tag}: {_detail(exc)}") from None
        log.info("building %s from %s", tag, context)
        try:
            image = self.docker.legacy_build(
                context,
                file=context / dockerfile,
                tags=[tag],
                labels={LABEL_MANAGED: "1", "agentcompass.context_hash": digest},
            )
        except DockerException as exc:
            raise EnvironmentUnavailable(f"building the image from {context} failed: {_detail(exc)}") from None
        self.builds += 1
        return ImageInfo(tag, image.config.user or "", built=True)

    def gateway_address(self, *, host: str, port: int, unix_socket: str) -> tuple[str, Mapping[str, str]]:
        """Containers have no network: each gets the gateway's Unix socket mounted and a forwarder on its
        own 127.0.0.1:``port``, so the URL is the same inside every container."""
        if not unix_socket:  # nothing to mount: only containers with a network can reach the TCP port
            return super().gateway_address(host=host, port=port, unix_socket=unix_socket)
        self._gateway = (os.path.abspath(unix_socket), int(port))
        return f"http://127.0.0.1:{port}/v1", {}

    # -- sessions --------------------------------------------------------------------------------------

    async def open(
        self, spec: EnvironmentSpec, *, run_id: str, task_id: str, base_env: Mapping[str, str]
    ) -> DockerSession:
        image = await self.image_for(spec)
        options = self.options
        user = spec.user or image.user or "0"
        memory = options.memory or spec.memory
        name = f"ac-{_slug(run_id, 20)}-{_slug(task_id, 40)}-{secrets.token_hex(3)}"
        mounts: list[list[str]] = []
        tmpfs: list[str] = []
        command = ["sh", "-c", _scripts.KEEPER, "ac-keeper"]
        main_user = user
        if spec.read_only:
            # Only the working directory (a volume, so the image's content there stays) and /tmp are writable.
            mounts.append(["type=volume", f"destination={spec.workdir}"])
            tmpfs.append("/tmp:rw,exec,nosuid,nodev,mode=1777")
        forward_port = None
        if self._gateway is not None:
            socket_path, forward_port = self._gateway
            mounts.append(["type=bind", f"source={socket_path}", f"target={_scripts.GATEWAY_SOCKET}", "readonly"])
            command += [_scripts.FORWARDER, _scripts.GATEWAY_SOCKET, str(forward_port)]
            # The forwarder runs as the host's user, who can always open the gateway's socket.
            main_user = f"{os.getuid()}:{os.getgid()}"
        create: dict[str, Any] = dict(
            name=name,
            labels={LABEL_MANAGED: "1", LABEL_RUN: run_id, LABEL_TASK: task_id},
            envs={**base_env, **spec.env},
            workdir=spec.workdir,
            user=main_user,
            networks=[options.network if spec.network else "none"],
            memory=memory,
            memory_swap=memory,  # no swap: past the limit, the OOM killer acts
            cpus=options.cpus or spec.cpus,
            pids_limit=options.pids_limit or spec.pids_limit,
            cap_drop=["ALL"],
            cap_add=list(options.cap_add),
            security_options=["no-new-privileges"],
            privileged=False,
            read_only=spec.read_only,
            tmpfs=tmpfs,
            mounts=mounts,
            init=options.init,
            pull="never",
        )
        start = asyncio.wrap_future(self._submit(self._create_and_start, image.ref, command, create))
        self._starting.add(start)
        start.add_done_callback(self._starting.discard)
        try:
            container_id = await asyncio.wait_for(asyncio.shield(start), options.start_timeout)
        except TimeoutError:
            start.add_done_callback(lambda _: self._submit(self._remove_quietly, name))
            raise InfrastructureError(
                f"starting a container for task {task_id!r} took longer than {options.start_timeout:.0f} s"
            ) from None
        except asyncio.CancelledError:
            start.add_done_callback(lambda _: self._submit(self._remove_quietly, name))
            raise
        except DockerException as exc:
            raise InfrastructureError(f"cannot start a container for task {task_id!r}: {_detail(exc)}") from None
        session = DockerSession(
            self,
            container_id=container_id,
            name=name,
            spec=spec,
            user=user,
            memory=memory,
            task_id=task_id,
            forward_port=forward_port,
        )
        self._sessions[container_id] = session
        if not _is_root(user):
            try:
                await self._call(session._capture, ["sh", "-c", _scripts.MAKE_WRITABLE, "ac-init", spec.workdir], "0")
            except BaseException:
                await self.close(session)
                raise
        return session

    def _create_and_start(self, image: str, command: list[str], create: dict[str, Any]) -> str:
        try:
            container = self.docker.container.create(image, command, **create)
        except DockerException:
            self._remove_quietly(create["name"])  # a half-created container may exist under its name
            raise
        try:
            self.docker.container.start(container)
        except DockerException:
            self._remove_quietly(container.id)
            raise
        return container.id

    def _remove_quietly(self, container: str) -> None:
        with contextlib.suppress(NoSuchContainer):
            try:
                self.docker.container.remove(container, force=True, volumes=True)
            except DockerException as exc:
                if "no such container" not in _detail(exc).lower():
                    log.warning("cannot remove container %s: %s", container, _detail(exc))

    async def close(self, session: EnvironmentSession) -> None:
        if not isinstance(session, DockerSession) or session.provider is not self:
            return
        session._shutdown()
        if session._close_future is None:
            if self.options.keep:
                done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                done.set_result(None)
                session._close_future = done
            else:
                session._close_future = asyncio.wrap_future(self._submit(self._remove_quietly, session.container_id))
                self._closing.add(session._close_future)
                session._close_future.add_done_callback(self._closing.discard)
                if len(self._closing) <= self.options.removal_backlog:
                    # The container is stopped for good (the session refuses further use); its removal goes on
                    # in the background, and teardown (on every path, Ctrl-C included) waits for it.
                    self._sessions.pop(session.container_id, None)
                    return
        try:
            await asyncio.wait_for(asyncio.shield(session._close_future), self.options.close_timeout)
        except TimeoutError:
            log.warning("removing container %s took longer than %.0f s", session.name, self.options.close_timeout)
        finally:
            self._sessions.pop(session.container_id, None)

    async def drain(self) -> None:
        """Wait until every removal started by ``close`` has finished."""
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=self.options.close_timeout)

    async def teardown(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.gather(*(self.close(s) for s in list(self._sessions.values())), return_exceptions=True)
            pending = self._starting | self._closing
            if pending:
                await asyncio.wait(pending, timeout=self.options.start_timeout)
            if self.run_id and not self.options.keep:
                left = await asyncio.wait_for(self.prune(self.run_id), self.options.close_timeout)
                if left:
                    log.info("teardown removed %d leftover containers of run %s", left, self.run_id)
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    async def prune(self, run_id: str | None = None) -> int:
        """Remove containers agentcompass started (``agentcompass.managed=1``), only the run's when
        ``run_id`` is given, running or not, with their anonymous volumes. Returns how many."""
        return await self._call(self._prune, run_id)

    def _prune(self, run_id: str | None) -> int:
        filters: list[Any] = [("label", f"{LABEL_MANAGED}=1")]
        if run_id:
            filters.append(("label", f"{LABEL_RUN}={run_id}"))
        try:
            containers = self.docker.container.list(all=True, filters=filters)
        except DockerException as exc:
            raise EnvironmentUnavailable(f"cannot list containers ({_detail(exc)}); {START_HINT}.") from None
        if not containers:
            return 0
        try:
            self.docker.container.remove(containers, force=True, volumes=True)
        except DockerException:  # one went away meanwhile: remove the rest one by one
            for container in containers:
                self._remove_quietly(container.id)
        return len(containers)


__all__ = ["DockerProvider", "DockerSession", "ImageInfo", "context_hash"]
