"""One task attempt's running container: ``exec`` and the file operations, each a ``docker exec`` of a small
script (``_scripts``) that first applies the batched writes (``writes``).

When a docker call fails in a way the command itself would not explain (the docker client's own exit codes,
a kill from outside, empty stderr, the daemon's words), the container is inspected: if it was removed,
killed, stopped or paused meanwhile, the operation raises :class:`InfrastructureError` naming what happened,
so the attempt is retried (``--retries``) instead of scored on a bogus exit status.
"""

from __future__ import annotations

import asyncio
import posixpath
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentcompass.errors import InfrastructureError
from agentcompass.runtime.environment import EnvironmentSession
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.types import EnvironmentSpec, ExecResult, NetworkPolicy
from python_on_whales.exceptions import DockerException

from agentcompass_docker import _scripts, egress
from agentcompass_docker.containers import LABEL_MANAGED, LABEL_OWNER, LABEL_RUN, ContainerPlan, owner_label
from agentcompass_docker.engine import file_error, says_gone
from agentcompass_docker.exec_protocol import (
    CANCEL_KILL_WINDOW,
    KILL_GRACE,
    ExecOutput,
    exec_result,
    kill_until_returned,
    wrapper_argv,
)
from agentcompass_docker.host import SessionHost
from agentcompass_docker.tar import extract_download, tar_for_upload
from agentcompass_docker.writes import WriteBatch

log = get_logger(plugin="docker")

#: Words of a docker client's stderr that point at the engine or the container, not at the command.
_ENGINE_WORDS = ("error response from daemon", "cannot connect to the docker daemon", "error during connect")
#: How long a container that looks fine after an exec was killed (137) is watched for the engine to notice.
KILLED_SETTLE = 0.5
#: The file operations (the exec server's names), each with the session method it serves (errors name it).
FILE_OPS = {"read": "read_bytes", "write": "write_bytes", "untar": "upload", "tar": "download"}
#: Each file operation's script and the name it runs under, on the ``docker exec`` path.
_FILE_SCRIPTS = {
    "read": (_scripts.READ, "ac-read"),
    "write": (_scripts.WRITE, "ac-write"),
    "untar": (_scripts.UNTAR, "ac-upload"),
    "tar": (_scripts.TAR_OUT, "ac-download"),
}


def _suspect(returncode: int | None, stderr: str) -> bool:
    """Whether a failed docker call may be the container's fault rather than the command's."""
    if returncode is None or returncode < 0 or returncode >= 125 or not stderr.strip():
        return True
    lowered = stderr.lower()
    return says_gone(lowered) or any(word in lowered for word in _ENGINE_WORDS)


class DockerSession(EnvironmentSession):
    """One running container, ``plan``'s (started as ``container_id``). Created by the provider's ``open`` only,
    which hands itself over as ``host``."""

    def __init__(
        self, host: SessionHost, plan: ContainerPlan, *, container_id: str, spec: EnvironmentSpec, task_id: str
    ) -> None:
        self.host = host
        self.engine = host.engine
        self.container_id = container_id
        self.name = plan.name
        self.spec = spec
        self.workdir = spec.workdir
        self.user = plan.user
        self.memory = plan.memory
        self.task_id = task_id
        self.closed = False
        self._forward_port = plan.forward_port  # cleared once the forwarder is known to listen
        self._writes = WriteBatch(host.options.write_delay, self._send_writes, self._closed_error)
        #: The container runs with ``--rm``: once gone, it may have been stopped or killed, not only removed.
        self.autoremove = plan.autoremove
        self.run_id = str(plan.create.get("labels", {}).get(LABEL_RUN, ""))
        #: The egress proxy of the current ``allowlist`` policy (:mod:`agentcompass_docker.egress`), if any.
        self.egress: egress.Egress | None = None
        #: Variables every ``exec`` gets under its own (the egress proxy's).
        self.network_env: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"DockerSession({self.name!r}, task_id={self.task_id!r})"

    def shell_command(self) -> list[str] | None:
        """``docker exec -it`` of an interactive ``bash`` (``sh`` without it) in the container's working directory."""
        user = ["--user", self.user] if self.user else []
        env = [f"--env={k}={v}" for k, v in self.spec.env.items()]
        docker = [str(part) for part in self.engine.docker.client_config.docker_cmd]
        if docker and Path(docker[0]).name == "setsid":  # the engine keeps its calls off the terminal; this needs it
            docker = docker[1:]
        return [*docker, "exec", "--interactive", "--tty", *user, *env,
                "--workdir", self.workdir, self.container_id, "sh", "-c",
                "if command -v bash >/dev/null; then exec bash -i; else exec sh -i; fi"]

    def path(self, path: str) -> str:
        """The absolute container path of ``path`` (relative paths resolve against the workdir)."""
        return posixpath.normpath(posixpath.join(self.workdir, str(path)))

    def _closed_error(self) -> InfrastructureError:
        return InfrastructureError(f"the container of task {self.task_id!r} is closed")

    def shutdown(self) -> None:
        """Refuse further use and forget pending writes: the container is going away."""
        self.closed = True
        self._writes.shutdown()

    # -- what happened to the container (worker threads) -----------------------------------------------

    def _gone_error(self, what: str, settle: float = 0.0) -> InfrastructureError | None:
        reason = self.host.containers.gone_reason(self.container_id, settle=settle, autoremove=self.autoremove)
        if reason is None:
            return None
        return InfrastructureError(f"the container {self.name} of task {self.task_id!r} {reason} during {what}")

    def _check_failure(self, what: str, returncode: int | None, stderr: str) -> None:
        """Raise :class:`InfrastructureError` when a failed docker call is the container's doing."""
        if not _suspect(returncode, stderr):
            return
        error = self._gone_error(what, KILLED_SETTLE if returncode == 137 else 0.0)
        if error is not None:
            raise error
        self._raise_if_said_gone(stderr)

    def _raise_if_said_gone(self, stderr: str) -> None:
        if says_gone(stderr):
            raise InfrastructureError(f"the container {self.name} of task {self.task_id!r} is gone: {stderr.strip()}")

    # -- docker calls (worker threads) -----------------------------------------------------------------

    def _capture(
        self, argv: Sequence[str], user: str | None = None, what: str = "a file operation"
    ) -> tuple[bytes, str, int]:
        """Run ``argv`` in the container; return (stdout bytes, stderr text, exit status)."""
        out, err = bytearray(), bytearray()
        rc: int | None = 0
        try:
            for source, chunk in self.engine.exec_stream(self.container_id, argv, user=user or self.user):
                (out if source == "stdout" else err).extend(chunk)
        except DockerException as exc:
            rc = exc.return_code if exc.return_code is not None else None
        except UnicodeDecodeError:  # python-on-whales decodes stderr to classify a failure
            rc = 1
        text = bytes(err).decode("utf-8", "replace")
        if rc != 0:
            self._check_failure(what, rc, text)
        return bytes(out), text, rc if rc is not None else 1

    def _stdin(self, argv: Sequence[str], data: bytes, what: str) -> None:
        """Run ``argv`` in the container with ``data`` on its stdin."""
        try:
            self.engine.exec_stdin(self.container_id, self.user, argv, data)
        except DockerException as exc:
            message = str(exc.stderr or "")
            self._check_failure(what, exc.return_code, message)
            raise file_error(str(argv[-1]), message) from None

    async def _send_writes(self, args: list[str]) -> None:
        _, err, rc = await self.engine.call(
            self._capture, ["sh", "-c", _scripts.PUTS, "ac-write", *args], None, "a batched write"
        )
        if rc != 0:
            raise file_error("(batched write)", err)

    # -- EnvironmentSession ------------------------------------------------------------------------------

    # The signature is EnvironmentSession.exec's (an override must repeat it); both paths share this one and
    # differ in _exec.
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
        workdir = self.path(cwd) if cwd else self.workdir
        return await self._exec([str(a) for a in argv], timeout, {**self.network_env, **(env or {})}, workdir)

    async def set_network(self, policy: NetworkPolicy) -> None:
        """``no-network``, ``public`` or ``allowlist`` from now on (see :mod:`agentcompass_docker.egress`)."""
        if self.closed:
            raise self._closed_error()
        options, timeout = self.host.options, self.host.options.start_timeout
        container = self.name
        previous, self.egress, self.network_env = self.egress, None, {}
        await self.engine.call(egress.isolate, self.engine, container, timeout)
        if previous is not None:
            await self.engine.call(egress.stop_egress, self.engine, previous, timeout)
        if policy.mode == "public":
            await self.engine.call(egress.connect, self.engine, container, options.network, timeout)
        elif policy.mode == "allowlist":
            labels = {LABEL_MANAGED: "1", LABEL_RUN: self.run_id, LABEL_OWNER: owner_label()}
            started = await self.engine.call(
                egress.start_egress, self.engine, container, list(policy.allowed_hosts), image=options.egress_image,
                outside=options.network, labels=labels, timeout=timeout)
            self.egress = started
            await self.engine.call(egress.connect, self.engine, container, started.network, timeout)
            self.network_env = started.env
        log.info("docker.network_policy", container=container, mode=policy.mode,
                 allowed_hosts=len(policy.allowed_hosts))

    async def drop_network(self) -> None:
        """Remove the egress proxy and its network, if any (the session is closing)."""
        if self.egress is not None:
            previous, self.egress = self.egress, None
            await self.engine.call(egress.stop_egress, self.engine, previous, self.host.options.start_timeout)

    async def _exec(self, argv: list[str], timeout: float | None, env: dict[str, str], workdir: str) -> ExecResult:
        """``exec`` with its arguments checked and ``cwd`` resolved: one ``docker exec`` of the wrapper."""
        loop = asyncio.get_running_loop()
        exec_id = secrets.token_hex(16)
        marker = secrets.token_hex(16)
        port = f"{self._forward_port:04X}" if self._forward_port else ""
        envs = {**env, _scripts.EXEC_ID_VARIABLE: exec_id}
        landed: asyncio.Future[None] | None = None

        def on_landed() -> None:
            if landed is not None:
                loop.call_soon_threadsafe(self._writes.resolve, landed)

        output = ExecOutput(b"\x1e" + marker.encode(), on_landed)

        def run(command: list[str]) -> int | None:
            try:
                stream = self.engine.exec_stream(self.container_id, command, envs=envs, user=self.user, workdir=workdir)
                for source, chunk in stream:
                    output.feed(source, chunk)
                return 0
            except DockerException as exc:
                return exc.return_code
            except UnicodeDecodeError:  # python-on-whales decodes stderr to classify a failure
                return None

        def kill(call: Any, seconds: float) -> None:
            kill_until_returned(
                self.engine, self.container_id, self.user, exec_id, output, call, seconds, lambda: self.closed
            )

        timed_out = False
        docker_rc: int | None = None
        writes, landed = await self._writes.take()
        try:
            call = self.engine.submit(run, wrapper_argv(marker, port, writes, argv))
            future = asyncio.wrap_future(call)

            def dropped() -> bool:
                """Cancel the call if it is still queued (then nothing ran); never one carrying writes."""
                return landed is None and call.cancel()

            try:
                docker_rc = await asyncio.wait_for(asyncio.shield(future), timeout)
            except TimeoutError:
                timed_out = True
                if not dropped():
                    await asyncio.wrap_future(self.engine.submit(kill, call, KILL_GRACE))
                if future.done() and not future.cancelled():
                    docker_rc = future.result()
            except asyncio.CancelledError:
                if not dropped() and not self.closed:  # the caller gave up: stop the processes, don't wait
                    self.engine.background(kill, call, CANCEL_KILL_WINDOW)
                raise
        finally:
            self._writes.resolve(landed)
        if port and not call.cancelled():
            self._forward_port = None  # the forwarder was waited for once; later execs skip the check
        if not timed_out and output.trailer is None and not output.write_failed:
            # The wrapper did not finish: the engine could not run it, or the container went away under it.
            settle = KILLED_SETTLE if docker_rc == 137 else 0.0
            error = await self.engine.call(self._gone_error, "exec", settle)
            if error is not None:
                raise error
            self._raise_if_said_gone(output.text("stderr"))
        return exec_result(output, timed_out=timed_out, docker_rc=docker_rc, memory=self.memory)

    async def read_bytes(self, path: str) -> bytes:
        return await self._file("read", self.path(path))

    async def write_bytes(self, path: str, data: bytes) -> None:
        target = self.path(path)
        data = bytes(data)
        if self._writes.accepts(data):
            await self._writes.add(target, data)  # rides along with the session's next call
            return
        await self._file("write", target, data)  # too large to batch: on its own (the pending writes first)

    async def upload(self, local_path: str | Path, path: str) -> None:
        directory, data = await asyncio.to_thread(tar_for_upload, Path(local_path), self.path(path))
        await self._file("untar", directory, data)

    async def download(self, path: str, local_path: str | Path) -> None:
        target = self.path(path)
        if target == "/":
            raise ValueError("cannot download the container's root directory")
        data = await self._file("tar", target)
        await asyncio.to_thread(extract_download, data, posixpath.basename(target), Path(local_path))

    async def _file(self, op: str, target: str, data: bytes | None = None) -> bytes:
        """One file operation (:data:`FILE_OPS`) on ``target``, after the session's pending small writes: a
        ``docker exec`` of its script, with ``data`` on its stdin. Its output; a failure is the ``OSError`` it
        stands for."""
        script, program = _FILE_SCRIPTS[op]
        argv = ["sh", "-c", script, program]
        writes, landed = await self._writes.take()
        try:
            if data is not None:
                await self.engine.call(self._stdin, [*argv, *writes, target], data, FILE_OPS[op])
                return b""
            out, err, rc = await self.engine.call(self._capture, [*argv, *writes, target], None, FILE_OPS[op])
        finally:
            self._writes.resolve(landed)
        if rc:
            raise file_error(target, err)
        return out
