"""The ``docker`` environment: one isolated container per task attempt, driven through python-on-whales.

Per task attempt the engine sees ``create`` + ``start`` on open (or none: the warm pool started the container
ahead, :mod:`~agentcompass_docker.pool`) and ``rm -f`` on close. With ``exec=server`` (the default) every
command and file operation in between is a request to the exec server inside the container
(:mod:`~agentcompass_docker._exec_server`, over a Unix socket in a per-container host directory,
:mod:`~agentcompass_docker.exec_dirs`); with ``exec=docker`` each is a ``docker exec`` (small writes ride
along with the next of those). The pieces:

* :mod:`~agentcompass_docker.engine`: the client, its worker threads, what engine errors mean;
* :mod:`~agentcompass_docker.images`: images by name or built, keyed by content, bases and build arguments;
* :mod:`~agentcompass_docker.containers`: creating, removing and finding containers by label;
* :mod:`~agentcompass_docker.host`: :class:`~agentcompass_docker.host.SessionHost`, what the sessions need from
  this provider (they import it, never this module);
* :mod:`~agentcompass_docker.server_session`: :class:`ServerSession`, the server path, with
  :mod:`~agentcompass_docker.server_protocol`;
* :mod:`~agentcompass_docker.session`: :class:`DockerSession`, the ``docker exec`` path, with
  :mod:`~agentcompass_docker.exec_protocol`, :mod:`~agentcompass_docker.writes` and
  :mod:`~agentcompass_docker.tar`.

Isolation defaults: no network, memory/CPU/process limits from the spec, every capability dropped,
``no-new-privileges`` (a spec with ``security="docker"`` keeps Docker's default capabilities instead), never
privileged, ``docker-init`` as PID 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import os
import threading
import weakref
from collections.abc import Coroutine, Hashable, Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from agentcompass.errors import InfrastructureError, describe
from agentcompass.runtime.environment import (
    EnvironmentDemand,
    EnvironmentProvider,
    EnvironmentSession,
    PruneReport,
)
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.types import EnvironmentSpec
from python_on_whales.exceptions import DockerException

from agentcompass_docker import _scripts, exec_dirs, native
from agentcompass_docker.containers import (
    LABEL_MANAGED,
    LABEL_POOL,
    LABEL_RUN,
    LABEL_TASK,
    ContainerPlan,
    Containers,
    CreateTicket,
    is_root,
    plan_container,
)
from agentcompass_docker.engine import Engine, detail
from agentcompass_docker.images import BUILD_REPOSITORY, ImageInfo, Images, context_hash
from agentcompass_docker.options import DockerOptions
from agentcompass_docker.pool import WarmPool, pool_key
from agentcompass_docker.registry import SharedLock
from agentcompass_docker.server_protocol import Exchange, ServerGone, peer_namespace
from agentcompass_docker.server_session import ServerSession, Started
from agentcompass_docker.session import DockerSession

log = get_logger(plugin="docker")

#: The default pool size (``prestart`` unset) is the run's concurrency, at most this.
AUTO_PRESTART_LIMIT = 8
#: Seconds a container's reset for its next task (``EnvironmentSpec.recycle``) may take.
RESET_TIMEOUT = 30.0


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class DockerProvider(EnvironmentProvider):
    """Docker containers as task environments. See the package README for options and defaults.

    It is the :class:`~agentcompass_docker.host.SessionHost` of the sessions it opens."""

    name = "docker"

    def __init__(self, **options: Any) -> None:
        self.options = DockerOptions.parse(options)
        self.engine = Engine(self.options)
        self.images = Images(self.engine, self.options)
        self.containers = Containers(
            self.engine, timeout=self.options.close_timeout, start_timeout=self.options.start_timeout
        )
        self.run_id = ""
        self._sessions: dict[str, DockerSession] = {}
        self._closing: set[asyncio.Future[Any]] = set()
        #: Each closed session's end (its container's removal), which a second ``close`` waits for too.
        self._ends: weakref.WeakKeyDictionary[DockerSession, asyncio.Future[Any]] = weakref.WeakKeyDictionary()
        self._gateway: tuple[str, int] | None = None
        self._pool: WarmPool[Started] = WarmPool(self._start_pooled, self._room)
        self._pool_specs: dict[Hashable, EnvironmentSpec] = {}
        self._max_environments: int | None = None
        self._starting = 0  # server containers being started (pool or cold)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._exec_dirs: set[str] = set()
        self._relays: set[asyncio.AbstractServer] = set()
        self._users: dict[tuple[str, str], asyncio.Future[tuple[int, int | None]]] = {}
        self._fallbacks_logged: set[str] = set()
        self._binary: asyncio.Future[Path | None] | None = None
        self._removal_lock = threading.Lock()
        self._removal_queue: list[tuple[str | None, str | None, Future[None]]] = []
        self._removal_running = False

    @property
    def docker(self) -> Any:
        """The python-on-whales client."""
        return self.engine.docker

    @property
    def builds(self) -> int:
        """Images this provider built (not found by tag); tests and logs read it."""
        return self.images.builds

    @property
    def pulled(self) -> int:
        """Images pulled from ``--env-arg registry`` instead of built here."""
        return self.images.pulled

    def share_builds(self, lock: SharedLock) -> None:
        """With ``--env-arg registry``: hold ``lock(tag)`` while pulling-or-building ``tag``, so machines that
        share the registry and the lock build each image once (the ``ray`` executor passes one)."""
        self.images.shared_lock = lock

    # -- run set-up ------------------------------------------------------------------------------------

    async def setup(self, specs: Iterable[EnvironmentSpec], *, run_id: str) -> None:
        """Check the engine, resolve the named images (a missing one stops the run here) and start the builds
        in the background, in the order given (the run's queue order), at most ``builds`` at once: each task
        waits for its own image only (:meth:`ready`)."""
        self.run_id = run_id
        specs = list(specs)
        await self.check_engine()
        await asyncio.gather(self.server_binary(), *self.images.start(specs))

    async def ready(self, spec: EnvironmentSpec) -> None:
        """Wait for the spec's image (built or resolved once, however many ask); its build is bounded by the
        build timeout, not the environment phase's. Shielded: a task cancelled meanwhile leaves the build to
        the others that wait for it."""
        await asyncio.shield(self.image_for(spec))

    async def plan(self, demand: EnvironmentDemand) -> None:
        """What the run will ask for (called once after :meth:`setup`, before any open): the pool's size
        (``prestart``, else the concurrency, at most 8, when it is above 1; never past ``--max-environments``),
        the predicted opens (``demand.opens``, in queue order: a spec shared by many tasks counts once per
        task) and the bound on live containers.

        Nothing here yields to the event loop before :meth:`gateway_address` (which the runner calls next):
        the pool's starts, scheduled here, run once the runner next awaits, with the gateway known."""
        self._max_environments = demand.max_environments
        if self.options.exec != "server":
            return
        size = self.options.prestart
        if size is None:
            size = min(demand.concurrency, AUTO_PRESTART_LIMIT) if demand.concurrency > 1 else 0
        if demand.max_environments:
            size = min(size, demand.max_environments)
        keys: dict[int, Hashable] = {}  # by spec object: a spec shared by every task is keyed once
        predicted: list[Hashable] = []
        for spec in demand.opens:
            key = keys.get(id(spec))
            if key is None:
                key = keys[id(spec)] = pool_key(spec)
                self._pool_specs.setdefault(key, spec)
            predicted.append(key)
        self._pool.size = size
        self._pool.predict(predicted)
        if size:
            log.info("docker.pool_planned", prestart=size, predicted=len(predicted))
        self._pool.refill()

    def _room(self) -> bool:
        """Whether one more container may be started (``--max-environments`` counts every live one)."""
        if not self._max_environments:
            return True
        return len(self._sessions) + self._pool.pending + self._starting < self._max_environments

    def background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` as a task that :meth:`drain` and :meth:`teardown` wait for."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def check_engine(self) -> None:
        """Raise :class:`~agentcompass.errors.EnvironmentUnavailable` unless the engine answers; resolve
        ``cgroup_parent=auto`` by the engine's cgroup driver."""
        await self.engine.check()
        if self.options.cgroup_parent == "auto":
            # A rootless engine (Podman as a non-root user) cannot make a cgroup at the root: its default then.
            parent = "/" if self.engine.cgroup_driver == "cgroupfs" and not self.engine.rootless else ""
            self.options = dataclasses.replace(self.options, cgroup_parent=parent)

    def image_for(self, spec: EnvironmentSpec) -> asyncio.Future[ImageInfo]:
        """The image a spec runs, resolved once per provider (a build runs once however many ask)."""
        return self.images.image_for(spec)

    def server_binary(self) -> asyncio.Future[Path | None]:
        """The static exec server the containers run (``exec=server``, ``server=native``), built once per
        provider (cached on the host across runs), or None: the Python server then (the warning event
        ``docker.exec_server_python`` says why)."""
        if self._binary is None:
            self._binary = asyncio.ensure_future(self._build_binary())
        return self._binary

    async def _build_binary(self) -> Path | None:
        if self.options.exec != "server" or self.options.server != "native":
            return None
        try:
            return await self.engine.call(native.build)
        except (native.BuildFailed, OSError) as exc:
            log.warning("docker.exec_server_python", reason=str(exc))
            return None

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
        image = await asyncio.shield(self.image_for(spec))  # shared by every task of the spec: never cancelled
        if self.options.exec == "server":
            why = await self._server_unusable(image, spec)
            if why is None:
                return await self._open_server(spec, image, run_id=run_id, task_id=task_id, base_env=base_env)
            self._log_fallback(image.ref, why)
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
        container_id = await self._create(plan, task_id)
        session = DockerSession(self, plan, container_id=container_id, spec=spec, task_id=task_id)
        self._sessions[container_id] = session
        if self._needs_workdir(plan):
            try:
                await self.engine.call(self._make_workdir, container_id, spec.workdir, plan.user)
            except BaseException:
                await self.close(session)
                raise
        return session

    async def _create(
        self, plan: ContainerPlan, task_id: str, in_flight: list[asyncio.Future[str]] | None = None
    ) -> str:
        """Create and start ``plan``'s container (in a worker thread); its id. Failures and a start past
        ``start_timeout`` are :class:`InfrastructureError`; a caller that gives up leaves nothing behind.
        ``in_flight`` gets the create's future (which goes on in its thread when the caller gives up)."""
        what = f"task {task_id!r}" if task_id else "the warm pool"
        ticket = CreateTicket(plan.name)
        start = asyncio.wrap_future(self.engine.submit(self.containers.create_and_start, plan, ticket))
        if in_flight is not None:
            in_flight.append(start)
        start.add_done_callback(_consume)  # seen even when this caller gave up (the create cleans up itself)
        try:
            return await asyncio.wait_for(asyncio.shield(start), self.options.start_timeout)
        except TimeoutError:
            self.containers.abandon(ticket)
            raise InfrastructureError(
                f"starting a container for {what} took longer than {self.options.start_timeout:.0f} s"
            ) from None
        except asyncio.CancelledError:
            self.containers.abandon(ticket)
            raise
        except DockerException as exc:
            raise InfrastructureError(f"cannot start a container for {what}: {detail(exc)}") from None

    # -- exec=server -------------------------------------------------------------------------------------

    def _log_fallback(self, image: str, why: str) -> None:
        if image not in self._fallbacks_logged:
            self._fallbacks_logged.add(image)
            log.warning("docker.exec_fallback", image=image, reason=why)

    async def _server_unusable(self, image: ImageInfo, spec: EnvironmentSpec) -> str | None:
        """Why the exec server cannot serve this spec's user from this host (then ``docker exec``), or None."""
        uid, _ = await self._uid_gid(image, spec)
        if os.geteuid() in (0, self._host_ids(uid, None)[0]):
            return None
        return (f"the session's user (uid {uid}) could not use a socket directory of this host's user "
                f"(uid {os.geteuid()}); run agentcompass as root or as uid {uid}")

    def _host_ids(self, uid: int, gid: int | None) -> tuple[int, int | None]:
        """The host's ids of a container's uid and gid: the same, except on a rootless engine, whose container
        root is the host's user (the socket directory is then this user's own)."""
        if self.engine.rootless and uid == 0:
            return os.geteuid(), os.getegid()
        return uid, gid

    def _uid_gid(self, image: ImageInfo, spec: EnvironmentSpec) -> asyncio.Future[tuple[int, int | None]]:
        """The numeric uid (and gid, if known) of the session's user, looked up in the image's /etc/passwd
        once per image when it is a name."""
        user = spec.user or image.user or "0"
        key = (image.ref, user)
        future = self._users.get(key)
        if future is None:
            future = asyncio.ensure_future(self.engine.call(self._lookup_user, image.ref, user))
            self._users[key] = future
        return future

    def _lookup_user(self, image: str, user: str) -> tuple[int, int | None]:
        name, _, group = user.partition(":")
        gid = int(group) if group.isdigit() else None
        if name in ("", "root"):
            return 0, gid if group else 0
        if name.isdigit():
            return int(name), gid
        try:
            passwd = self.engine.cli(
                ["run", "--rm", "--network", "none", "--user", "0", "--entrypoint", "cat", image, "/etc/passwd"],
                self.options.start_timeout,
            )
        except (DockerException, InfrastructureError) as exc:
            raise InfrastructureError(f"cannot look up user {name!r} in image {image}: {detail(exc)}") from None
        for line in passwd.splitlines():
            fields = line.split(":")
            if len(fields) > 3 and fields[0] == name and fields[2].isdigit():
                return int(fields[2]), gid if group else (int(fields[3]) if fields[3].isdigit() else None)
        raise InfrastructureError(f"image {image} has no user {name!r} (its /etc/passwd does not name it)")

    async def _start_server_container(self, spec: EnvironmentSpec, *, run_id: str, task_id: str) -> Started:
        """Create and start a container running the exec server, and wait until it answers. ``task_id`` empty:
        a pool container. Nothing is left behind on failure or cancellation."""
        loop = asyncio.get_running_loop()
        image = await self.image_for(spec)
        uid, gid = self._host_ids(*await self._uid_gid(image, spec))
        exec_dir = await self.engine.call(exec_dirs.make_exec_dir, run_id, uid, gid, await self.server_binary())
        self._exec_dirs.add(exec_dir)
        began = loop.time()
        relay: asyncio.AbstractServer | None = None
        container_id: str | None = None
        in_flight: list[asyncio.Future[str]] = []
        self._starting += 1
        try:
            if self._gateway is not None:
                relay = await self._relay(exec_dir)
            plan = plan_container(
                spec, self.options, image=image.ref, image_user=image.user, run_id=run_id, task_id=task_id,
                base_env={}, gateway=self._gateway, exec_dir=exec_dir,
            )
            container_id = await self._create(plan, task_id, in_flight)
            created = loop.time()
            if self._needs_workdir(plan):
                await self.engine.call(self._make_workdir, container_id, spec.workdir, plan.user)
            fallback, pid, namespace = await self._wait_ready(container_id, plan.name, exec_dir)
            if fallback is not None:
                self._log_fallback(image.ref, fallback)
            seconds = {"create_start": created - began, "server_ready": loop.time() - created}
            return Started(container_id, plan, exec_dir, relay, fallback, pid, namespace, seconds)
        except BaseException:
            if relay is not None:
                relay.close()
                self._relays.discard(relay)
            if container_id is None and in_flight and not in_flight[0].done():
                # The create goes on: its directory goes once it has ended (a bind source removed before
                # the start makes the start fail, and a `docker run --rm` whose start failed never returns).
                in_flight[0].add_done_callback(lambda _: self._remove_soon(None, exec_dir))
            else:
                self._remove_soon(container_id, exec_dir)
            raise
        finally:
            self._starting -= 1

    async def _start_pooled(self, key: Hashable) -> Started:
        started = await self._start_server_container(self._pool_specs[key], run_id=self.run_id, task_id="")
        log.debug("docker.pool_ready", container=started.plan.name)
        return started

    def _needs_workdir(self, plan: ContainerPlan) -> bool:
        """Whether the working directory needs a ``docker exec`` as root after the start: for a non-root
        session user (to make it writable), and on Podman, which is not given ``--workdir`` (it would refuse
        one the image lacks, where Docker creates it)."""
        return not is_root(plan.user) or plan.create["workdir"] is None

    def _make_workdir(self, container_id: str, workdir: str, user: str) -> None:
        """Create the working directory (as Docker's ``--workdir`` does) and let a non-root session user write
        it (a ``docker exec`` as root). On Podman this one call runs ``--privileged`` (every capability, for
        this process only): the container's root may have none (``hardened``), and Podman leaves the image's
        own mode on ``/`` (an imported root file system may have it 0700), where Docker shows 0755."""
        script = _scripts.MAKE_WORKDIR if is_root(user) else _scripts.MAKE_WRITABLE
        with contextlib.suppress(DockerException):
            self.engine.docker.container.execute(container_id, ["sh", "-c", script, "ac-init", workdir], user="0",
                                                 privileged=self.engine.name == "podman")

    async def _wait_ready(self, container_id: str, name: str, exec_dir: str) -> tuple[str | None, int, str]:
        """Wait until the exec server answers (``(None, its pid, its pid namespace)``), or it says it cannot run
        (``(why, 0, "")``: ``docker exec`` then). The container going away meanwhile, or ``start_timeout``
        passing, is an InfrastructureError."""
        loop = asyncio.get_running_loop()
        socket_path = os.path.join(exec_dir, exec_dirs.SOCKET_NAME)
        marker = os.path.join(exec_dir, exec_dirs.NO_SERVER_NAME)
        started = loop.time()
        check_at = started + 2.0  # the container's state is asked (a CLI call) only when the start is slow
        delay = 0.003  # a failed connect costs microseconds
        while True:
            try:
                exchange = await Exchange.open(socket_path, {"op": "ping"})
                try:
                    namespace = peer_namespace(exchange.writer)
                    reply = await exchange.reply(lambda kind, payload: None)
                finally:
                    exchange.close()
                return None, int(reply.get("pid") or 0), namespace
            except ServerGone:
                pass
            if os.path.exists(marker):  # noqa: ASYNC240 - one stat of a local directory entry
                why = await asyncio.to_thread(Path(marker).read_text, encoding="utf-8", errors="replace")
                return why.strip() or "the exec server did not start", 0, ""
            now = loop.time()
            if now >= check_at:
                reason = await self.engine.call(self.containers.gone_reason, container_id)
                if reason is not None:
                    raise InfrastructureError(f"the container {name} {reason} while its exec server started")
                check_at = now + 2.0
            if now - started > self.options.start_timeout:
                raise InfrastructureError(
                    f"the exec server of container {name} did not start within {self.options.start_timeout:.0f} s"
                )
            await asyncio.sleep(delay)

    async def _relay(self, exec_dir: str) -> asyncio.AbstractServer:
        """A Unix socket in the exec directory that relays to the model gateway (so that the server, running as
        the session's user, reaches a socket only the host's user may open)."""
        assert self._gateway is not None
        gateway_socket = self._gateway[0]

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_unix_connection(gateway_socket)
            except OSError:
                writer.close()
                return
            try:
                await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
            finally:
                writer.close()
                up_writer.close()

        path = os.path.join(exec_dir, exec_dirs.GATEWAY_NAME)
        server = await asyncio.start_unix_server(handle, path=path)
        os.chmod(path, 0o666)  # the directory (0700, the session user's) is what keeps others out
        self._relays.add(server)
        return server

    async def _open_server(
        self, spec: EnvironmentSpec, image: ImageInfo, *, run_id: str, task_id: str, base_env: Mapping[str, str]
    ) -> DockerSession:
        key = pool_key(spec)
        pooled = self._pool.take(key) if run_id == self.run_id else None
        self._pool.refill()  # the next predicted open's container starts now, while this one is awaited
        started: Started | None = None
        from_pool = False
        if pooled is not None:
            try:
                started = await asyncio.wait_for(asyncio.shield(pooled), self.options.start_timeout)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if not pooled.cancelled() or (current is not None and current.cancelling()):
                    self.background(_discard(pooled, self))
                    raise
                log.warning("docker.pool_start_failed", error="cancelled (the run is ending)")
            except Exception as exc:
                log.warning("docker.pool_start_failed", error=describe(exc))
            else:
                from_pool = True
                log.debug("docker.pool_taken", container=started.plan.name, task_id=task_id)
        if started is None:
            started = await self._start_server_container(spec, run_id=run_id, task_id=task_id)
        session = ServerSession(self, started, spec=spec, task_id=task_id, base_env=base_env, pooled=from_pool)
        self._sessions[started.container_id] = session
        return session

    def _remove_soon(self, container_id: str | None, exec_dir: str | None) -> asyncio.Future[Any]:
        """Remove a container and its exec directory in a worker thread (tracked: teardown waits). Removals
        asked for while one is running go together, in one ``docker rm`` (one CLI call for many)."""
        done: Future[None] = Future()
        self.containers.expect_removals(1)  # the teardown sweep waits for queued removals too
        with self._removal_lock:
            self._removal_queue.append((container_id, exec_dir, done))
            start = not self._removal_running
            self._removal_running = True
        if start:
            self.engine.submit(self._run_removals)
        future = asyncio.wrap_future(done)
        self._closing.add(future)
        future.add_done_callback(self._closing.discard)
        if exec_dir is not None:
            future.add_done_callback(lambda _: self._exec_dirs.discard(exec_dir))
        return future

    def _end_soon(self, session: ServerSession) -> asyncio.Future[Any]:
        """End a server session's container without a docker call: its server kills every process and exits,
        the container stops and the engine removes it (``--rm``); :meth:`drain` and the teardown sweep wait
        until it is gone. A server that does not answer: ``rm -f`` (:meth:`_remove_soon`)."""
        self.containers.expect_ends(1)  # the teardown sweep waits for this (briefly: it runs on the event loop)

        async def end() -> None:
            try:
                if await session.end_container():
                    self.containers.retire(session.container_id)
                    await asyncio.to_thread(exec_dirs.remove_exec_dir, session.exec_dir)
                    self._exec_dirs.discard(session.exec_dir)
                else:
                    await self._remove_soon(session.container_id, session.exec_dir)
            finally:
                self.containers.expect_ends(-1)

        future = asyncio.ensure_future(end())
        self._closing.add(future)
        future.add_done_callback(self._closing.discard)
        return future

    def _run_removals(self) -> None:
        """Worker thread: remove what is queued, batch after batch, until the queue is empty."""
        while True:
            with self._removal_lock:
                batch, self._removal_queue = self._removal_queue, []
                if not batch:
                    self._removal_running = False
                    return
            try:
                self.containers.remove_many([c for c, _, _ in batch if c is not None])
            finally:
                for _, exec_dir, done in batch:
                    if exec_dir is not None:
                        exec_dirs.remove_exec_dir(exec_dir)
                    done.set_result(None)
                self.containers.expect_removals(-len(batch))

    async def close(self, session: EnvironmentSession) -> None:
        if not isinstance(session, DockerSession) or session.host is not self:
            return
        if session.egress is not None:  # an allowlist's proxy and network go with the session
            try:
                await session.drop_network()
            except Exception as exc:
                log.warning("docker.egress_remove_failed", container=session.name, error=str(exc)[:300])
        session.shutdown()
        end = self._ends.get(session)
        if end is None:
            if self.options.keep:
                end = asyncio.get_running_loop().create_future()
                end.set_result(None)
                self._ends[session] = end
            else:
                exec_dir = None
                if isinstance(session, ServerSession) and self._recycle(session):
                    end = asyncio.get_running_loop().create_future()
                    end.set_result(None)
                    self._ends[session] = end
                    self._sessions.pop(session.container_id, None)
                    return
                if isinstance(session, ServerSession):
                    exec_dir = session.exec_dir
                    if session.relay is not None:
                        session.relay.close()
                        self._relays.discard(session.relay)
                if isinstance(session, ServerSession) and session.autoremove and self.options.removal_backlog:
                    future = self._end_soon(session)
                else:
                    future = self._remove_soon(session.container_id, exec_dir)
                end = self._ends[session] = future
                if len(self._closing) <= self.options.removal_backlog:
                    # The container is stopped for good (the session refuses further use); its removal goes on
                    # in the background, and teardown (on every path, Ctrl-C included) waits for it.
                    self._sessions.pop(session.container_id, None)
                    return
        try:
            await asyncio.wait_for(asyncio.shield(end), self.options.close_timeout)
        except TimeoutError:
            log.warning("docker.remove_slow", container=session.name, seconds=self.options.close_timeout)
        finally:
            self._sessions.pop(session.container_id, None)

    def _recycle(self, session: ServerSession) -> bool:
        """A closed session of a ``recycle`` spec: hand its container to the pool (reset first, by
        :meth:`_reset`) when a coming open of the same spec has none yet. False: end it as usual."""
        if not session.recyclable or session.egress is not None:
            return False
        key = pool_key(session.spec)
        if not self._pool.wants(key):
            return False
        self._pool.give(key, asyncio.ensure_future(self._reset(session.started, session.spec)))
        return True

    async def _reset(self, started: Started, spec: EnvironmentSpec) -> Started:
        """Kill every process a task left in ``started``'s container and empty its working directory, ``/tmp`` and
        ``/dev/shm`` (:data:`~agentcompass_docker._scripts.RESET`); the container, ready for the next task. A reset
        that fails (or is cancelled) removes the container and raises."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        reset = ServerSession(self, started, spec=spec, task_id="", base_env={})
        try:
            result = await reset.exec(["sh", "-c", _scripts.RESET, "ac-reset", str(started.server_pid), spec.workdir],
                                      timeout=RESET_TIMEOUT, cwd="/")
            if result.returncode != 0:
                raise InfrastructureError(f"container {started.plan.name} could not be reset for its next task "
                                          f"(status {result.returncode}): {result.stderr.strip()[-300:]}")
        except BaseException as exc:
            if started.relay is not None:
                started.relay.close()
                self._relays.discard(started.relay)
            self._remove_soon(started.container_id, started.exec_dir)
            if not isinstance(exc, asyncio.CancelledError):
                log.warning("docker.recycle_failed", container=started.plan.name, error=describe(exc))
            raise
        finally:
            reset.shutdown()
        log.debug("docker.recycled", container=started.plan.name, seconds=round(loop.time() - began, 4))
        return dataclasses.replace(started, seconds={"reset": loop.time() - began})

    async def drain(self) -> None:
        """Wait until every removal started by ``close`` has finished, and every background hunt for the
        processes of a cancelled ``exec``."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.options.close_timeout)
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=self.options.close_timeout)
        await self.engine.call(self.containers.await_retired, self.options.close_timeout)
        await self.engine.idle(self.options.close_timeout)

    async def teardown(self) -> None:
        """Remove every container of the run: those of open sessions, those whose removal is under way, and
        those whose creation was still in flight (they are removed as soon as the engine answers for them).

        The final sweep (by the run's label) runs in a thread of its own, so it completes even if this
        coroutine is cancelled (a second Ctrl-C) or the event loop stops; the interpreter waits for it
        before it exits.
        """
        self.containers.close()  # first of all: no create may start from now on
        self.images.close()  # builds still running are killed
        for task in self._pool.close():
            task.cancel()  # a pool start cleans up after itself; a started one is removed by the sweep below
        for session in list(self._sessions.values()):
            session.shutdown()
        for relay in list(self._relays):
            relay.close()
        self._relays.clear()
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
            if not self.options.keep:
                for exec_dir in list(self._exec_dirs):
                    exec_dirs.remove_exec_dir(exec_dir)
                self._exec_dirs.clear()
            self.engine.shutdown()

    async def prune(self, run_id: str | None = None) -> PruneReport:
        """Remove containers agentcompass started (``agentcompass.managed=1``), only the run's when
        ``run_id`` is given, running or not, with their anonymous volumes, except those a live process owns
        (:meth:`Containers.prune`). Returns how many, and what was kept."""
        return await self.engine.call(self.containers.prune, run_id)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one direction of a relayed connection, then half-close it."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


async def _discard(pooled: asyncio.Future[Started], provider: DockerProvider) -> None:
    """A pool container handed to an open that was cancelled: remove it once it has started."""
    with contextlib.suppress(BaseException):
        started = await pooled
        if started.relay is not None:
            started.relay.close()
        await provider._remove_soon(started.container_id, started.exec_dir)


__all__ = [
    "BUILD_REPOSITORY",
    "LABEL_MANAGED",
    "LABEL_POOL",
    "LABEL_RUN",
    "LABEL_TASK",
    "DockerProvider",
    "DockerSession",
    "ImageInfo",
    "ServerSession",
    "context_hash",
]
