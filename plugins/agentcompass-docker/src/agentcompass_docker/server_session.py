"""A session whose commands and file operations go to the container's exec server (``_exec_server``) over its
Unix socket (``server_protocol``) instead of ``docker exec``: about a millisecond per call instead of tens.

The contract is :class:`~agentcompass_docker.session.DockerSession`'s: the same results, the same batched
writes (they ride along with the next request), the same errors. What is new: the base environment travels
with every ``exec`` (so a container can be started before its task is known), and a server that cannot be
reached, or stops mid-request, is an :class:`~agentcompass.errors.InfrastructureError` naming what happened
to the container (removed, killed, ...) or to the server. Timeouts are enforced by the server (it kills the
exec's processes) and, should it not answer within :data:`HOST_GRACE` more, by the host.

A session opened in a container whose image cannot run the server (no ``python3``) falls back to the
``docker exec`` path of its base class.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import os
import secrets
from collections.abc import Mapping
from typing import Any

from agentcompass.errors import InfrastructureError
from agentcompass.runtime.liveness import sign_of_life
from agentcompass.runtime.types import EnvironmentSpec, ExecResult, NetworkPolicy

from agentcompass_docker import exec_dirs
from agentcompass_docker.containers import LABEL_POOL, ContainerPlan
from agentcompass_docker.engine import file_error
from agentcompass_docker.exec_protocol import CANCEL_KILL_WINDOW, ExecOutput, exec_result
from agentcompass_docker.host import SessionHost
from agentcompass_docker.server_protocol import Exchange, ServerGone
from agentcompass_docker.session import FILE_OPS, KILLED_SETTLE, DockerSession

#: Seconds past an exec's timeout the host waits for the server's answer before it gives up on the server.
HOST_GRACE = 15.0
#: Seconds the server has to answer a ``shutdown`` (then the provider removes the container with ``rm -f``).
SHUTDOWN_BOUND = 2.0


def _nothing() -> None:
    pass


@dataclasses.dataclass
class Started:
    """A container whose exec server answers (or that falls back to ``docker exec``), not yet a session's."""

    container_id: str
    plan: ContainerPlan
    #: The host directory holding the server's socket.
    exec_dir: str
    #: The host side of the gateway relay in ``exec_dir``, or None.
    relay: asyncio.AbstractServer | None
    #: Why the server is not used (the image cannot run it), or None.
    fallback: str | None
    #: The server's pid inside the container (0 with the fallback).
    server_pid: int = 0
    #: The container's pid namespace, from the server's first answer ("" when it cannot be told).
    namespace: str = ""
    #: Where its start went: seconds to create and start it (engine), then until the server answered.
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)


class ServerSession(DockerSession):
    """One container driven through its exec server (``started``). Created by the provider's ``open`` only.

    :param base_env: the session's base environment, sent with every ``exec`` (under the spec's ``env``).
    :param pooled: whether the warm pool started the container.
    """

    def __init__(
        self, host: SessionHost, started: Started, *, spec: EnvironmentSpec, task_id: str,
        base_env: Mapping[str, str], pooled: bool = False,
    ) -> None:
        super().__init__(host, started.plan, container_id=started.container_id, spec=spec, task_id=task_id)
        if not started.fallback:
            self._forward_port = None  # the server forwards the gateway's port before it answers
        self.exec_dir = started.exec_dir
        self.socket = os.path.join(started.exec_dir, exec_dirs.SOCKET_NAME)
        self.base_env = {**base_env, **self.spec.env}  # the spec's variables win, as in the container's own
        self.fallback = started.fallback
        #: The host side of the gateway relay in ``exec_dir`` (closed with the session), or None.
        self.relay = started.relay
        #: The exec server's pid inside the container (0 with the fallback).
        self.server_pid = started.server_pid
        #: The container's pid namespace, as the server's first answer showed it: every later connection must
        #: reach a process in it (None: not checked).
        self.namespace = started.namespace or None
        #: Where the container's start went (seconds: ``create_start``, ``server_ready``; ``pooled`` 1.0 when
        #: the warm pool started it), for benchmarks and logs.
        self.start_seconds = {**started.seconds, "pooled": float(pooled)}
        #: The container as it was handed over (a ``recycle`` spec's goes back to the pool from it).
        self.started = started
        #: Whether the container may go on to another task after this one (``EnvironmentSpec.recycle``): a pool
        #: container (no task's label) on the server path whose network was never switched.
        self.recyclable = spec.recycle and not started.fallback and LABEL_POOL in started.plan.create["labels"]

    # -- the server ----------------------------------------------------------------------------------

    async def _gone(self, what: str, why: str) -> InfrastructureError:
        """The error for a server that stopped answering: what happened to the container, else to the server."""
        error = await self.engine.call(self._gone_error, what, KILLED_SETTLE)
        if error is not None:
            return error
        return InfrastructureError(
            f"the exec server of container {self.name} (task {self.task_id!r}) {why} during {what}"
        )

    async def _request(
        self, what: str, header: dict[str, Any], data: bytes | None = None, *, sink: bytearray | None = None,
        landed: asyncio.Future[None] | None = None,
    ) -> dict[str, Any]:
        """One request; ``D`` frames go to ``sink``. Raises InfrastructureError when the server is gone and the
        batched-write error when a write that rode along failed."""
        if self.closed:
            raise self._closed_error()

        def on_frame(kind: bytes, payload: bytes) -> None:
            if kind == b"D" and sink is not None:
                sink.extend(payload)
            elif kind == b"W":
                self._writes.resolve(landed)

        try:
            exchange = await Exchange.open(self.socket, header, data, namespace=self.namespace)
            try:
                reply = await exchange.reply(on_frame)
            finally:
                exchange.close()
        except ServerGone as exc:
            raise await self._gone(what, str(exc)) from None
        _raise_batched(reply)
        return reply

    async def end_container(self) -> bool:
        """Ask the exec server to end the container (it kills every process, answers, exits; the container stops
        and the engine removes it, ``--rm``): no docker call. False when the server cannot (the fallback, a
        container without ``--rm``) or does not answer within :data:`SHUTDOWN_BOUND`: then ``rm -f`` it."""
        if self.fallback or not self.autoremove:
            return False
        try:
            exchange = await Exchange.open(self.socket, {"op": "shutdown"}, namespace=self.namespace)
            try:
                reply = await asyncio.wait_for(exchange.reply(lambda kind, payload: None), SHUTDOWN_BOUND)
            finally:
                exchange.close()
        except (ServerGone, TimeoutError, OSError):
            return False
        return reply.get("status") == 0

    async def set_network(self, policy: NetworkPolicy) -> None:
        self.recyclable = False  # a switched network is not the spec's: the container is not handed on
        await super().set_network(policy)

    async def _send_writes(self, args: list[str]) -> None:
        if self.fallback:
            return await super()._send_writes(args)
        await self._request("a batched write", {"op": "puts", "writes": args[1:]})

    # -- EnvironmentSession ------------------------------------------------------------------------------

    async def _exec(self, argv: list[str], timeout: float | None, env: dict[str, str], workdir: str) -> ExecResult:
        """``exec`` (checked by :meth:`DockerSession.exec`): one request to the server."""
        sign_of_life("exec " + " ".join(argv)[:120])
        if self.fallback:
            return await super()._exec(argv, timeout, {**self.base_env, **env}, workdir)
        header: dict[str, Any] = {
            "op": "exec",
            "argv": argv,
            "env": {**self.base_env, **env},
            "cwd": workdir,
            "timeout": timeout,
            "id": secrets.token_hex(16),
        }
        output = ExecOutput(b"\x1e" + secrets.token_hex(16).encode(), _nothing)  # no marker lines: never matches
        cut = [0, 0]
        writes, landed = await self._writes.take()
        header["writes"] = writes[1:]
        exchange: Exchange | None = None
        try:
            try:
                exchange = await Exchange.open(self.socket, header, namespace=self.namespace)
            except ServerGone as exc:
                raise await self._gone("exec", str(exc)) from None

            def on_frame(kind: bytes, payload: bytes) -> None:
                if kind == b"O":
                    sign_of_life("exec output")
                    output.feed("stdout", payload)
                elif kind == b"R":
                    sign_of_life("exec output")
                    output.feed("stderr", payload)
                elif kind == b"W":
                    self._writes.resolve(landed)

            bound = None if timeout is None else max(timeout, 0.0) + HOST_GRACE
            try:
                reply = await asyncio.wait_for(exchange.reply(on_frame), bound)
            except TimeoutError:
                raise InfrastructureError(
                    f"the exec server of container {self.name} (task {self.task_id!r}) did not end a timed-out "
                    f"exec within {HOST_GRACE:.0f} s"
                ) from None
            except ServerGone as exc:
                raise await self._gone("exec", str(exc)) from None
            except asyncio.CancelledError:
                # The caller gave up: the server kills the processes; its answer is awaited in the background.
                self.host.background(_finish_cancelled(exchange))
                exchange = None
                raise
        finally:
            self._writes.resolve(landed)
            if exchange is not None:
                exchange.close()
        _raise_batched(reply)
        cut = [*(int(n) for n in reply.get("cut") or ()), 0, 0]
        output.cut["stdout"] += cut[0]
        output.cut["stderr"] += cut[1]
        oom = [*(reply.get("oom") or ()), "-", "-"][:2]
        output.trailer = [str(reply.get("status", -1)).encode(), str(oom[0]).encode(), str(oom[1]).encode()]
        return exec_result(output, timed_out=bool(reply.get("timed_out")), docker_rc=None, memory=self.memory)

    async def _file(self, op: str, target: str, data: bytes | None = None) -> bytes:
        """One file operation: a request carrying the session's pending small writes (applied first, in order)."""
        if self.fallback:
            return await super()._file(op, target, data)
        sink = bytearray()
        writes, landed = await self._writes.take()
        try:
            header = {"op": op, "dir" if op == "untar" else "path": target, "writes": writes[1:]}
            reply = await self._request(FILE_OPS[op], header, data, sink=sink, landed=landed)
        finally:
            self._writes.resolve(landed)
        _raise_file_error(reply, target)
        return bytes(sink)


def _raise_batched(reply: Mapping[str, Any]) -> None:
    error = reply.get("error")
    if isinstance(error, dict) and error.get("batched"):
        raise file_error("(batched write)", str(error.get("message", "")))


def _raise_file_error(reply: Mapping[str, Any], path: str) -> None:
    """Raise the ``OSError`` a file request's reply stands for: an ``error`` (errno), or a tool's status."""
    error = reply.get("error")
    if isinstance(error, dict):
        number = error.get("errno")
        message = str(error.get("message") or f"cannot access {path}")
        if isinstance(number, int) and number in errno.errorcode:
            raise OSError(number, message, path)
        raise file_error(path, message)
    if reply.get("status", 0) != 0:
        raise file_error(path, str(reply.get("stderr") or ""))


async def _finish_cancelled(exchange: Exchange) -> None:
    """Ask the server to kill a cancelled exec's processes and wait (bounded) until it says it has."""
    try:
        exchange.cancel()
        await asyncio.wait_for(exchange.reply(lambda kind, payload: None), CANCEL_KILL_WINDOW)
    except (ServerGone, TimeoutError, OSError):
        pass
    finally:
        exchange.close()


__all__ = ["ServerSession", "Started"]
