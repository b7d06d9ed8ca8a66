"""``--executor ray``: a run's attempts spread over the nodes of a Ray cluster.

The head (this process) keeps the run directory, the model gateway, the provider credentials and the attempt
queue. Each node gets one async actor (:class:`~agentcompass_ray.worker.NodeWorker`) that reserves the
resources of the attempts it may run at once (``num_cpus`` and ``resources`` per attempt, one unit of the
docker marker per attempt with ``--env docker``), so ``--concurrency`` and ``--max-environments`` hold over the
whole cluster. For every attempt the head grants a gateway token (the meter stays here), sends the attempt as
plain data, and records what comes back through the attempt queue as it arrives.

A worker that dies mid-attempt (its process or its node) makes that attempt an infrastructure failure, retried
under ``--retries``; the executor then starts a worker again on the nodes still alive. Ctrl-C cancels the
attempts in flight: each one's lifecycle closes its environments on its node before the actors go.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

import attrs
from agentcompass.errors import UsageError
from agentcompass.runtime.executor import AttemptSource, ExecutionContext, Executor
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.remote import RemoteGrant, RemoteOutcome
from agentcompass.runtime.types import EnvironmentSpec, RunRequest

from agentcompass_ray.cluster import (
    Connection,
    NodeSlots,
    alive_nodes,
    attempt_demand,
    connect,
    describe_shortage,
    plan_slots,
)
from agentcompass_ray.images import share_images
from agentcompass_ray.options import RayOptions

#: Seconds an actor gets to close what its attempts left open before it is killed.
CLOSE_SECONDS = 90.0
#: How often a run looks for nodes that joined the cluster (while its workers hold fewer slots than it wants).
NODE_POLL_SECONDS = 2.0
LOOPBACK_PREFIXES = ("127.", "::1", "localhost")


@attrs.define(eq=False)
class _Actor:
    handle: Any
    node: NodeSlots
    busy: int = 0
    alive: bool = True
    node_log: Any = None
    log_follower: asyncio.Task[None] | None = None

    @property
    def free(self) -> int:
        return self.node.slots - self.busy if self.alive else 0


async def _settled(ref: Any) -> None:
    """Wait (up to :data:`CLOSE_SECONDS`) until a cancelled remote attempt has unwound on its node, its
    environments closed, however often this wait is itself cancelled."""
    future = asyncio.wrap_future(ref.future())
    deadline = asyncio.get_running_loop().time() + CLOSE_SECONDS
    while not future.done():
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return
        try:
            await asyncio.wait_for(asyncio.shield(future), left)
        except asyncio.CancelledError:
            continue
        except BaseException:
            return
    if not future.cancelled():
        future.exception()  # retrieved: a cancelled task's error is expected


async def _follow(stream: Any, grant: RemoteGrant, node: str) -> RemoteOutcome | None:
    """Follow a remote attempt's stream: each phase change reaches the head's observers as it comes, and each
    warning the run's log (naming ``node``, unless it does), in order; then its outcome is returned (``None``
    if the stream ended without one)."""
    async for ref in stream:
        # Through a concurrent future: on a busy loop it resolves sooner than awaiting the ref itself.
        kind, value = await asyncio.wrap_future(ref.future())
        if kind == "phase":
            grant.phase(*value)
        elif kind == "log":
            level, event, fields = value
            grant.log(level, event, {"node": node, **fields})
        else:
            return value
    return None


async def _follow_node_log(stream: Any, node: str) -> None:
    """Follow a node's own log (:meth:`~agentcompass_ray.worker.NodeWorker.node_log`: an image pulled, built or
    pushed there): each event goes to the run's log as it comes, naming ``node`` unless it does. Ends with the
    node's worker; a worker lost is said elsewhere (``ray.worker_lost``)."""
    log = get_logger()
    with contextlib.suppress(Exception):
        async for ref in stream:
            level, event, fields = await asyncio.wrap_future(ref.future())
            getattr(log, level)(event, **{"node": node, **fields})


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


class RayExecutor(Executor):
    """Runs attempts on a Ray cluster (``--executor-arg address=auto``) or a local Ray instance."""

    name = "ray"
    remote = True

    def __init__(self, **options: Any) -> None:
        self.options = RayOptions.parse(options)
        self._connection: Connection | None = None
        self._actors: list[_Actor] = []
        self._request: RunRequest | None = None
        self._environments: list[EnvironmentSpec] = []
        self._demand: dict[str, float] = {}
        self._wanted = 0
        self._changed = asyncio.Condition()
        self._replenishing: asyncio.Task[None] | None = None
        self._growing = asyncio.Lock()
        #: Nodes that joined but cannot run this run (a plugin missing): not tried again.
        self._refused: set[str] = set()
        #: Attempts sent to each node (by address), for the run's log.
        self._dispatched: dict[str, int] = {}
        #: The run's image build locks (``registry=``), an actor handle.
        self._image_locks: Any = None

    # -- before the run ------------------------------------------------------------------------------

    async def check(self, request: RunRequest, environments: list[EnvironmentSpec],
                    secrets: Iterable[str] = ()) -> None:
        """Join the cluster, start one worker per node with room, and check each can run this request (its
        plugins installed); then set the workers up. A problem is a UsageError naming the node."""
        self._request, self._environments = request, environments
        schedule = request.schedule
        self._wanted = min(schedule.concurrency, schedule.max_environments or schedule.concurrency)
        # On this thread: Ray installs its signal handlers only from the main one. Before the run starts.
        self._connection = connect(self.options, local_cpus=self._wanted * self.options.num_cpus, secrets=secrets)
        import ray

        nodes = alive_nodes()
        self._demand = attempt_demand(self.options, docker=request.environment == "docker", nodes=nodes)
        if request.execution.gateway_host.startswith(LOOPBACK_PREFIXES):
            remote_nodes = [str(n.get("NodeManagerAddress")) for n in nodes
                            if not str(n.get("NodeManagerAddress", "")).startswith(LOOPBACK_PREFIXES)]
            if remote_nodes:
                raise UsageError(
                    f"the Ray cluster has nodes on other machines ({', '.join(sorted(set(remote_nodes)))}), "
                    f"which cannot reach the model gateway on {request.execution.gateway_host}; pass --gateway-host "
                    "0.0.0.0 (or this machine's address on their network)")
        if self.options.registry and request.environment == "docker":
            self._request, self._image_locks = await share_images(request, environments, self.options.registry)
        plan = plan_slots(nodes, self._demand, self._wanted)
        if not plan:
            raise UsageError(describe_shortage(nodes, self._demand))
        actors = [self._spawn(node) for node in plan]
        self._actors = actors
        problems = await self._prepare(actors, ray)
        if problems:
            raise UsageError("some Ray nodes cannot run this run: " + "; ".join(problems)
                             + ". Install the same agentcompass plugins on every node")

    def _spawn(self, node: NodeSlots) -> _Actor:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from agentcompass_ray.worker import NodeWorker

        extra = {k: v * node.slots for k, v in self._demand.items() if k not in ("CPU", "GPU")}
        handle = ray.remote(NodeWorker).options(
            num_cpus=self._demand.get("CPU", 0.0) * node.slots,
            num_gpus=self._demand.get("GPU", 0.0) * node.slots,
            resources=extra,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            max_concurrency=node.slots + 8,
            max_restarts=0,
            max_task_retries=0,
        ).remote()
        return _Actor(handle, node)

    async def _prepare(self, actors: list[_Actor], ray: Any) -> list[str]:
        """Check then set up each actor (all checked before any sets up); the problems, by node."""
        timeout = self.options.startup_timeout
        try:
            reports = await asyncio.wait_for(
                asyncio.gather(*(a.handle.check.remote(self._request) for a in actors)), timeout)
        except TimeoutError:
            raise UsageError(f"the Ray workers did not start within {timeout:g}s (is the cluster busy, or "
                             "short of the resources they reserve?)") from None
        except ray.exceptions.RayError as exc:
            raise UsageError(f"a Ray worker failed to start: {_short(exc)}") from None
        problems = [f"node {a.node.address} ({r['host']}): {p}" for a, r in zip(actors, reports, strict=True)
                    for p in r["problems"]]
        if problems:
            return problems
        for a in actors:  # followed once the run's log is open (_follow_node_logs); kept by Ray until then
            a.node_log = a.handle.node_log.options(num_returns="streaming").remote()
        try:
            await asyncio.gather(*(a.handle.setup.remote(self._environments, self._image_locks) for a in actors))
        except ray.exceptions.RayTaskError as exc:
            return [f"setting up the environments failed: {_short(exc.cause or exc)}"]
        return []

    # -- the run -------------------------------------------------------------------------------------

    async def execute(self, attempts: AttemptSource, context: ExecutionContext) -> None:
        url = self._gateway_url(context)
        log = get_logger()
        self._follow_node_logs()
        log.info("ray.workers_ready", nodes=[a.node.address for a in self._actors],
                 slots=[a.node.slots for a in self._actors], demand=self._demand, gateway=url)
        held = sum(a.node.slots for a in self._actors)
        if held < self._wanted:
            log.warning("ray.capacity", requested=self._wanted, held=held, demand=self._demand,
                        hint="the cluster holds fewer attempts at once than asked; lower --executor-arg "
                             "num_cpus= or add nodes")
        workers = [asyncio.create_task(self._worker(attempts, context, url)) for _ in range(self._wanted)]
        watching = asyncio.create_task(self._watch_nodes())
        try:
            await asyncio.gather(*workers)
        finally:
            watching.cancel()
            with contextlib.suppress(BaseException):
                await watching
            log.info("ray.finished", attempts_by_node=dict(self._dispatched))
            for w in workers:
                w.cancel()
            await asyncio.wait(workers)  # each cancels its remote attempt and waits for it to close
            for w in workers:
                if not w.cancelled():
                    w.exception()
            if self._replenishing is not None:
                self._replenishing.cancel()
                with contextlib.suppress(BaseException):
                    await self._replenishing

    def _follow_node_logs(self) -> None:
        """Write each worker's own log (its set-up's image progress) to the run's log from now on: called where
        the run's log is open (the run, not :meth:`check`, which comes before it)."""
        for a in self._actors:
            if a.node_log is not None and a.log_follower is None:
                a.log_follower = asyncio.create_task(_follow_node_log(a.node_log, a.node.address))

    def _gateway_url(self, context: ExecutionContext) -> str:
        import ray

        host = context.gateway_host
        if host in ("0.0.0.0", "::", ""):
            host = ray.util.get_node_ip_address()
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{context.gateway_port}/v1"

    async def _worker(self, attempts: AttemptSource, context: ExecutionContext, url: str) -> None:
        import ray

        log = get_logger()
        while (spec := await attempts.next()) is not None:
            actor = await self._acquire()
            grant = context.grant_remote(spec, url)
            if actor is None:
                attempts.report(grant.fail("no Ray worker is left to run it (every node is gone)"))
                continue
            stream = actor.handle.run.options(num_returns="streaming").remote(grant.attempt)
            self._dispatched[actor.node.address] = self._dispatched.get(actor.node.address, 0) + 1
            try:
                returned = await _follow(stream, grant, actor.node.address)
            except asyncio.CancelledError:
                grant.revoke()
                ray.cancel(stream)
                await _settled(stream.completed())
                raise
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                    ray.exceptions.ObjectLostError, ray.exceptions.NodeDiedError) as exc:
                actor.alive = False
                log.warning("ray.worker_lost", node=actor.node.address, task_id=spec.task.task_id,
                            trial=spec.trial, attempt=spec.attempt, error=_short(exc))
                outcome = grant.fail(f"the Ray worker on node {actor.node.address} was lost mid-attempt "
                                     f"({_short(exc)})")
                self._replenish()
            except ray.exceptions.RayError as exc:
                outcome = grant.fail(f"the Ray worker on node {actor.node.address} failed: {_short(exc)}")
            else:
                try:
                    if returned is None:
                        raise RuntimeError("the worker's stream ended without an outcome")
                    outcome = grant.finish(returned)
                except Exception as exc:  # e.g. artifacts that cannot be written here
                    outcome = grant.fail(f"recording the attempt failed: {_short(exc)}", retryable=False)
            finally:
                await self._release(actor)
            attempts.report(outcome)

    async def _acquire(self) -> _Actor | None:
        """The live actor with the most free slots (waiting for one); None when none is left."""
        async with self._changed:
            while True:
                best = max(self._actors, key=lambda a: a.free, default=None)
                if best is not None and best.free > 0:
                    best.busy += 1
                    return best
                if not any(a.alive for a in self._actors) and self._replenishing is None:
                    return None
                await self._changed.wait()

    async def _release(self, actor: _Actor) -> None:
        async with self._changed:
            actor.busy -= 1
            self._changed.notify_all()

    def _replenish(self) -> None:
        """Start workers again on the nodes still alive, up to the planned concurrency (in the background)."""
        if self._replenishing is None:
            self._replenishing = asyncio.create_task(self._start_again())

    async def _start_again(self) -> None:
        try:
            for _ in range(3):  # again when another worker died meanwhile
                await asyncio.sleep(0.5)  # let Ray notice what died with it
                if not await self._grow("ray.workers_restarted"):
                    return
        finally:
            async with self._changed:
                self._replenishing = None
                self._changed.notify_all()

    async def _watch_nodes(self) -> None:
        """While the run lasts: give nodes that join the cluster workers, while the workers hold fewer
        attempts at once than the run wants."""
        while True:
            await asyncio.sleep(NODE_POLL_SECONDS)
            if self._replenishing is None:
                await self._grow("ray.nodes_joined")

    async def _grow(self, event: str) -> bool:
        """Start workers on live nodes without one, for the slots the run wants and the workers lack; whether
        any started. One growth at a time."""
        import ray

        log = get_logger()
        async with self._growing:
            try:
                live = [a for a in self._actors if a.alive]
                missing = self._wanted - sum(a.node.slots for a in live)
                if missing <= 0:
                    return False
                taken = {a.node.node_id for a in live} | self._refused
                nodes = [n for n in await asyncio.to_thread(alive_nodes) if n["NodeID"] not in taken]
                fresh = [self._spawn(node) for node in plan_slots(nodes, self._demand, missing)]
                if not fresh:
                    if event == "ray.workers_restarted":
                        log.warning("ray.restart_failed", error="no live node has room for another worker")
                    return False
                problems = await self._prepare(fresh, ray)
                if problems:
                    log.warning("ray.restart_failed" if event == "ray.workers_restarted" else "ray.join_failed",
                                problems=problems)
                    for a in fresh:
                        ray.kill(a.handle)
                    if event == "ray.nodes_joined":  # not asked again in this run
                        self._refused |= {a.node.node_id for a in fresh}
                    return False
                async with self._changed:
                    self._actors = [*(a for a in self._actors if a.alive or a.busy), *fresh]
                    self._changed.notify_all()
                self._follow_node_logs()
                log.info(event, nodes=[a.node.address for a in fresh], slots=[a.node.slots for a in fresh])
                return True
            except Exception as exc:
                log.warning("ray.restart_failed" if event == "ray.workers_restarted" else "ray.join_failed",
                            error=_short(exc))
                return False

    # -- after the run -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Each worker closes what is left and tears its provider down; then the actors go, and a local Ray
        instance this executor started stops."""
        import ray

        if not ray.is_initialized():
            if self._connection is not None:
                self._connection.close()
            return
        live = [a for a in self._actors if a.alive]
        if live:
            closing = [a.handle.close.remote() for a in live]
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), CLOSE_SECONDS)
        followers = [a.log_follower for a in self._actors if a.log_follower is not None]
        if followers:  # each ends once its worker closed; what it still had to say is written first
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.gather(*followers, return_exceptions=True), 5)
        for a in self._actors:
            with contextlib.suppress(Exception):
                ray.kill(a.handle)
        self._actors = []
        if self._image_locks is not None:
            with contextlib.suppress(Exception):
                ray.kill(self._image_locks)
            self._image_locks = None
        if self._connection is not None:
            await asyncio.to_thread(self._connection.close)
            self._connection = None
