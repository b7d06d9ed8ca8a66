"""The ``docker`` environment: one isolated container per task attempt, driven through python-on-whales.

Per task attempt the engine sees: ``create`` + ``start`` on open, one ``exec`` per command, file read or
download (small writes ride along with the next of those), ``rm -f`` on close. The pieces:

* :mod:`~agentcompass_docker.engine`: the client, its worker threads, what engine errors mean;
* :mod:`~agentcompass_docker.images`: images by name or built by content hash;
* :mod:`~agentcompass_docker.containers`: creating, removing and finding containers by label;
* :mod:`~agentcompass_docker.session`: :class:`DockerSession`, exec and files in one container, with
  :mod:`~agentcompass_docker.exec_protocol`, :mod:`~agentcompass_docker.writes` and
  :mod:`~agentcompass_docker.tar`.

Isolation defaults: no network, memory/CPU/process limits from the spec, every capability dropped,
``no-new-privileges``, never privileged, ``docker-init`` as PID 1.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any

from agentcompass.errors import InfrastructureError, describe
from agentcompass.runtime.environment import EnvironmentProvider, EnvironmentSession
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.types import EnvironmentSpec
from python_on_whales.exceptions import DockerException

from agentcompass_docker import _scripts
from agentcompass_docker.containers import (
    LABEL_MANAGED,
    LABEL_RUN,
    LABEL_TASK,
    Containers,
    CreateTicket,
    is_root,
    plan_container,
)
from agentcompass_docker.engine import Engine, detail
from agentcompass_docker.images import BUILD_REPOSITORY, ImageInfo, Images, context_hash
from agentcompass_docker.options import DockerOptions
from agentcompass_docker.session import DockerSession

log = get_logger(plugin="docker")


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class DockerProvider(EnvironmentProvider):
    """Docker containers as task environments. See the package README for options and defaults."""

    name = "docker"

    def __init__(self, **options: Any) -> None:
        self.options = DockerOptions.parse(options)
        self.engine = Engine(self.options)
        self.images = Images(self.engine, self.options)
        self.containers = Containers(self.engine, timeout=self.options.close_timeout)
        self.run_id = ""
        self._sessions: dict[str, DockerSession] = {}
        self._closing: set[asyncio.Future[Any]] = set()
        self._gateway: tuple[str, int] | None = None

    @property
    def docker(self) -> Any:
        """The python-on-whales client."""
        return self.engine.docker

    @property
    def builds(self) -> int:
        """Images this provider built (not found by tag); tests and logs read it."""
        return self.images.builds

    # -- run set-up ------------------------------------------------------------------------------------

    async def setup(self, specs: Iterable[EnvironmentSpec], *, run_id: str) -> None:
        self.run_id = run_id
        await self.check_engine()
        await asyncio.gather(*(self.image_for(spec) for spec in list(specs)))

    async def check_engine(self) -> None:
        """Raise :class:`~agentcompass.errors.EnvironmentUnavailable` unless the engine answers."""
        await self.engine.check()

    def image_for(self, spec: EnvironmentSpec) -> asyncio.Future[ImageInfo]:
        """The image a spec runs, resolved once per provider (a build runs once however many ask)."""
        return self.images.image_for(spec)

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
        plan = plan_container(
            spec,
            self.options,
            image=image.ref,
            image_user=image.user,
            run_id=run_id,
            task_id=task_id,
            base_env=base_env,
            gateway=self._gateway,
        )
        ticket = CreateTicket(plan.name)
        start = asyncio.wrap_future(self.engine.submit(self.containers.create_and_start, plan, ticket))
        start.add_done_callback(_consume)  # seen even when this caller gave up (the create cleans up itself)
        try:
            container_id = await asyncio.wait_for(asyncio.shield(start), self.options.start_timeout)
        except TimeoutError:
            self.containers.abandon(ticket)
            raise InfrastructureError(
                f"starting a container for task {task_id!r} took longer than {self.options.start_timeout:.0f} s"
            ) from None
        except asyncio.CancelledError:
            self.containers.abandon(ticket)
            raise
        except DockerException as exc:
            raise InfrastructureError(f"cannot start a container for task {task_id!r}: {detail(exc)}") from None
        session = DockerSession(
            self,
            container_id=container_id,
            name=plan.name,
            spec=spec,
            user=plan.user,
            memory=plan.memory,
            task_id=task_id,
            forward_port=plan.forward_port,
        )
        self._sessions[container_id] = session
        if not is_root(plan.user):
            try:
                await self.engine.call(
                    session._capture, ["sh", "-c", _scripts.MAKE_WRITABLE, "ac-init", spec.workdir], "0", "open"
                )
            except BaseException:
                await self.close(session)
                raise
        return session

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
                future = asyncio.wrap_future(self.engine.submit(self.containers.remove_quietly, session.container_id))
                session._close_future = future
                self._closing.add(future)
                future.add_done_callback(self._closing.discard)
                if len(self._closing) <= self.options.removal_backlog:
                    # The container is stopped for good (the session refuses further use); its removal goes on
                    # in the background, and teardown (on every path, Ctrl-C included) waits for it.
                    self._sessions.pop(session.container_id, None)
                    return
        try:
            await asyncio.wait_for(asyncio.shield(session._close_future), self.options.close_timeout)
        except TimeoutError:
            log.warning("docker.remove_slow", container=session.name, seconds=self.options.close_timeout)
        finally:
            self._sessions.pop(session.container_id, None)

    async def drain(self) -> None:
        """Wait until every removal started by ``close`` has finished, and every background hunt for the
        processes of a cancelled ``exec``."""
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=self.options.close_timeout)
        await self.engine.idle(self.options.close_timeout)

    async def teardown(self) -> None:
        """Remove every container of the run: those of open sessions, those whose removal is under way, and
        those whose creation was still in flight (they are removed as soon as the engine answers for them).

        The final sweep (by the run's label) runs in a thread of its own, so it completes even if this
        coroutine is cancelled (a second Ctrl-C) or the event loop stops; the interpreter waits for it
        before it exits.
        """
        self.containers.close()  # first of all: no create may start from now on
        for session in list(self._sessions.values()):
            session._shutdown()
        sweep: Future[int] = Future()

        def run_sweep() -> None:
            try:
                remove = self.engine.answered and not self.options.keep
                removed = self.containers.sweep(self.run_id, wait=self.options.start_timeout, remove=remove)
            except BaseException as exc:
                sweep.set_exception(exc)
            else:
                sweep.set_result(removed)

        try:
            context = contextvars.copy_context()  # the run's logger, for the sweep's events
            threading.Thread(target=context.run, args=(run_sweep,), name="agentcompass-docker-teardown").start()
            bound = self.options.start_timeout + 2 * self.options.close_timeout
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(sweep)), bound)
        except Exception as exc:
            log.warning("docker.teardown_incomplete", run_id=self.run_id, error=describe(exc))
        finally:
            self._sessions.clear()
            self.engine.shutdown()

    async def prune(self, run_id: str | None = None) -> int:
        """Remove containers agentcompass started (``agentcompass.managed=1``), only the run's when
        ``run_id`` is given, running or not, with their anonymous volumes. Returns how many."""
        return await self.engine.call(self.containers.prune, run_id)


__all__ = [
    "BUILD_REPOSITORY",
    "LABEL_MANAGED",
    "LABEL_RUN",
    "LABEL_TASK",
    "DockerProvider",
    "DockerSession",
    "ImageInfo",
    "context_hash",
]
