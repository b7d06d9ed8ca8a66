"""The connection to the Docker engine (or Podman, ``--env-arg engine=podman``): the python-on-whales client,
the thread pool its (blocking) calls run in, and what the engine's errors mean.

Podman takes the same CLI arguments for everything the provider does, so the one difference here is the
program python-on-whales runs (and, at the engine check, how its cgroup manager is asked for and the hint
given when it does not answer).

python-on-whales runs the ``docker`` CLI synchronously, so every call goes through :meth:`Engine.submit`:
a worker thread, with the caller's context variables (so the run's logger still applies there).

Each CLI process starts in a session of its own (``setsid``, where it exists): a Ctrl-C in the terminal
reaches the whole foreground process group, and a ``docker create`` or ``docker rm`` killed half-way leaves
the engine in a state nobody knows about. The provider handles the signal and cleans up in order instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar, cast

from agentcompass.errors import EnvironmentUnavailable, describe
from agentcompass.runtime.logs import get_logger
from python_on_whales import DockerClient
from python_on_whales.client_config import ClientNotFoundError
from python_on_whales.exceptions import DockerException
from python_on_whales.utils import run as _docker_run

from agentcompass_docker.options import DockerOptions

T = TypeVar("T")

log = get_logger(plugin="docker")

#: The engine must answer ``docker info`` within this many seconds.
ENGINE_CHECK_TIMEOUT = 30.0

START_HINT = (
    "install one as https://docs.docker.com/engine/install/ says and start dockerd (e.g. `sudo systemctl start "
    "docker`; on Debian, agentcompass's .ci/docker-up.sh does both as root), and check DOCKER_HOST (or --env-arg "
    "host=URL)"
)
PODMAN_HINT = (
    "install Podman as https://podman.io/docs/installation says (on Debian, agentcompass's .ci/podman-up.sh "
    "does it as root), check that `podman info` answers as this user, and check CONTAINER_HOST (or --env-arg "
    "host=URL)"
)


def start_hint(engine: str) -> str:
    """How to get ``engine`` (``docker`` or ``podman``) to answer."""
    return PODMAN_HINT if engine == "podman" else START_HINT

#: Words of the engine's error messages that mean the container is gone (or cannot run anything now).
_GONE = ("no such container", "is not running", "is restarting", "is paused", "marked for removal")


def detail(exc: BaseException) -> str:
    """The useful part of a python-on-whales error: the docker CLI's last stderr line (else
    :func:`agentcompass.errors.describe` of the exception)."""
    stderr = getattr(exc, "stderr", None)
    if stderr:
        lines = [line.strip() for line in str(stderr).strip().splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return describe(exc)


def says_gone(message: str) -> bool:
    """Whether an engine error message says the container is gone or not running."""
    lowered = message.lower()
    return any(marker in lowered for marker in _GONE)


def file_error(path: str, stderr: str) -> OSError:
    """The ``OSError`` a failed file script's stderr stands for."""
    message = stderr.strip() or f"cannot access {path}"
    if "No such file" in message or "Cannot stat" in message:
        return FileNotFoundError(errno.ENOENT, message, path)
    if "Is a directory" in message:
        return IsADirectoryError(errno.EISDIR, message, path)
    if "Permission denied" in message or "Read-only file system" in message:
        return PermissionError(errno.EACCES, message, path)
    return OSError(errno.EIO, message, path)


def _client_call(program: str = "docker") -> list[str]:
    docker = shutil.which(program)
    setsid = shutil.which("setsid")
    if docker is None or setsid is None:
        return [program]  # python-on-whales reports a missing CLI itself
    # A child of Popen never leads its process group, so setsid execs docker directly (no fork): the exit
    # status and the output are docker's own.
    return [setsid, docker]


class Engine:
    """One provider's docker client and worker threads."""

    def __init__(self, options: DockerOptions) -> None:
        self.threads = options.threads
        #: ``docker`` or ``podman``: the CLI every call runs.
        self.name = options.engine
        self.docker = DockerClient(host=options.host, context=options.context, client_call=_client_call(self.name),
                                   client_type="podman" if self.name == "podman" else "docker")
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._background: set[Future[Any]] = set()
        #: Whether the engine ever answered :meth:`check` (no answer: nothing can have been created).
        self.answered = False
        #: The engine's cgroup driver (``cgroupfs``, ``systemd``), once :meth:`check` has asked; "" if unknown.
        self.cgroup_driver = ""
        #: Whether the engine runs rootless (Podman as a non-root user; Docker's rootless mode), once asked.
        self.rootless = False
        #: Whether the engine can limit a container's storage (``--storage-opt size=``), as far as its storage
        #: driver tells once :meth:`check` has asked: False for ``overlay2`` on a filesystem other than xfs
        #: (it needs xfs with ``pquota``); None when that cannot be told (a first create finds out).
        self.storage_limits: bool | None = None

    # -- threads ---------------------------------------------------------------------------------------

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn`` in a worker thread, with the caller's context variables."""
        context = contextvars.copy_context()
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="agentcompass-docker")
            return self._pool.submit(context.run, fn, *args, **kwargs)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.wrap_future(self.submit(fn, *args, **kwargs))

    def background(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` in a worker thread that nobody waits for (see :meth:`idle`)."""
        future = self.submit(fn, *args)
        with self._lock:
            self._background.add(future)
        future.add_done_callback(self._background_done)

    def _background_done(self, future: Future[Any]) -> None:
        with self._lock:
            self._background.discard(future)

    async def idle(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until the work started by :meth:`background` has finished."""
        with self._lock:
            pending = [asyncio.wrap_future(f) for f in self._background]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    def shutdown(self) -> None:
        """Stop taking work; calls already running finish on their own."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    # -- blocking calls (worker threads only) ----------------------------------------------------------

    def exec_stream(self, container: str, argv: Sequence[str], **kwargs: Any) -> Iterator[tuple[str, bytes]]:
        """``docker exec`` with its output as raw ``("stdout"|"stderr", bytes)`` pieces (lines), as they come.
        A non-zero exit raises :class:`DockerException` at the end."""
        stream = self.docker.container.execute(container, list(argv), stream=True, **kwargs)
        return cast(Iterator[tuple[str, bytes]], stream)

    def exec_stdin(self, container: str, user: str, argv: Sequence[str], data: bytes) -> None:
        """``docker exec --interactive`` with ``data`` on the command's stdin; raises :class:`DockerException`.

        python-on-whales's ``execute`` cannot feed stdin, so this goes through its own runner
        (``python_on_whales.utils.run``) with the client's configured docker command.
        """
        command = [*self.docker.client_config.docker_cmd, "exec", "--interactive", "--user", user, container]
        _docker_run([*command, *argv], input=data)

    def cli(self, args: Sequence[str], timeout: float, *, probe: Callable[[], object] | None = None) -> str:
        """Run ``docker ARGS...`` (with the client's host and context) for at most ``timeout`` seconds; its
        stdout. Raises :class:`DockerException` on a non-zero exit, :class:`EnvironmentUnavailable` when the
        engine does not answer in time. For clean-up, which must end even when the engine hangs.

        ``probe``: called once when the CLI has run :data:`PROBE_AFTER` seconds; if it raises
        :class:`DockerException`, the CLI is killed and that raised (``docker run --rm`` whose start failed
        waits for a removal that never comes); if it returns False (nothing to tell yet), it is called again
        :data:`PROBE_AFTER` seconds later; otherwise, if the CLI still runs :data:`PROBE_GRACE` seconds more,
        it is killed and a :class:`DockerException` raised."""
        command = [str(part) for part in self.docker.client_config.docker_cmd] + list(args)
        try:
            if probe is not None:
                returncode, stdout, stderr = _run_probed(command, timeout, probe)
            else:
                done = subprocess.run(command, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
                returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired:
            raise EnvironmentUnavailable(f"`docker {args[0]}` got no answer within {timeout:.0f} s") from None
        except OSError as exc:
            raise EnvironmentUnavailable(f"cannot run the docker CLI: {describe(exc)}") from None
        if returncode != 0:
            raise DockerException(command, returncode, stdout, stderr)
        return stdout.decode("utf-8", "replace")

    # -- the engine check ------------------------------------------------------------------------------

    async def check(self) -> None:
        """Raise :class:`EnvironmentUnavailable` unless the engine answers."""
        try:
            await asyncio.wait_for(self.call(self._ping), ENGINE_CHECK_TIMEOUT)
        except TimeoutError:
            raise EnvironmentUnavailable(
                f"the {self.title} engine did not answer within {ENGINE_CHECK_TIMEOUT:.0f} s; "
                f"{start_hint(self.name)}."
            ) from None

    @property
    def title(self) -> str:
        """The engine as a message names it: ``Docker`` or ``Podman``."""
        return self.name.capitalize()

    def _ping(self) -> None:
        try:
            if self.name == "podman":  # its `info` is not Docker's: ask for the two fields
                command = [*self.docker.client_config.docker_cmd, "info", "--format",
                           "{{.Host.CgroupManager}} {{.Host.Security.Rootless}}"]
                driver, _, rootless = str(_docker_run(command)).strip().partition(" ")
                self.cgroup_driver, self.rootless = driver, rootless.strip() == "true"
            else:
                info = self.docker.system.info()
                self.cgroup_driver = str(info.cgroup_driver or "")
                self.rootless = any("rootless" in str(option) for option in info.security_options or ())
                self.storage_limits = storage_limits(str(info.driver or ""), info.driver_status or ())
        except (DockerException, ClientNotFoundError) as exc:
            raise EnvironmentUnavailable(
                f"no {self.title} engine answers ({detail(exc)}); {start_hint(self.name)}."
            ) from None
        except Exception as exc:  # an answer python-on-whales cannot parse is still an answer
            log.debug("docker.info_unparsed", error=describe(exc)[:200])
        self.answered = True

def storage_limits(driver: str, status: Any) -> bool | None:
    """Whether a Docker engine with storage ``driver`` (and ``docker info``'s ``DriverStatus`` pairs) can limit a
    container's storage: ``overlay2`` only on xfs (mounted with ``pquota``, which ``info`` does not show: then
    None, as for every other driver)."""
    if driver != "overlay2":
        return None
    backing = next((str(v) for k, v in (tuple(pair)[:2] for pair in status if len(tuple(pair)) >= 2)
                    if str(k) == "Backing Filesystem"), "")
    if not backing:
        return None
    return None if backing.lower() == "xfs" else False


#: Seconds a probed CLI call (``Engine.cli(probe=...)``) runs before the probe is asked, and may run after it.
PROBE_AFTER = 5.0
PROBE_GRACE = 2.0


def _run_probed(command: list[str], timeout: float, probe: Callable[[], object]) -> tuple[int, bytes, bytes]:
    """Run ``command``; (status, stdout, stderr), see :meth:`Engine.cli`. :class:`subprocess.TimeoutExpired`
    after ``timeout``."""
    started = time.monotonic()
    probed: float | None = None
    probe_at = started + PROBE_AFTER
    with subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=0.25)
                return proc.returncode, stdout, stderr
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            failure = b""
            if probed is None and now >= probe_at:
                probed = now
                try:
                    if probe() is False:  # nothing to tell yet: ask again later
                        probed, probe_at = None, now + PROBE_AFTER
                except DockerException as exc:
                    failure = detail(exc).encode() or b"docker start failed"
                except Exception:  # no answer from the probe: the CLI may still end on its own
                    pass
            if failure or (probed is not None and now - probed >= PROBE_GRACE) or now - started >= timeout:
                proc.kill()
                stdout, stderr = proc.communicate()
                if not failure and now - started >= timeout:
                    raise subprocess.TimeoutExpired(command, timeout)
                return 125, stdout, stderr + (failure or b"the docker CLI did not end after its container started")
