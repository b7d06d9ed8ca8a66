"""The Ray actor that runs a run's attempts on one node: an async actor, many attempts at once.

One actor per node and run: the plugins are imported and the environment provider set up once (images built
once per node, or once per cluster with a registry), then every attempt the head sends runs through the
ordinary lifecycle on the actor's event loop. Cancelling an attempt's Ray task cancels its lifecycle, which
closes its environments.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from agentcompass.runtime.logs import FORWARDED_LEVELS, forwarded_warnings
from agentcompass.runtime.remote import AttemptWorker, RemoteAttempt, RemoteOutcome, sendable
from agentcompass.runtime.types import EnvironmentSpec, RunRequest

from agentcompass_ray.images import cluster_lock


class NodeWorker:
    """Ray actor body (wrapped with ``ray.remote`` by the executor)."""

    def __init__(self) -> None:
        self.worker: AttemptWorker | None = None
        self._node_log: asyncio.Queue[tuple[str, str, dict[str, Any]] | None] | None = None

    async def check(self, request: RunRequest) -> dict[str, Any]:
        """Load the plugins and build the run's benchmark, harness and environment here; what went wrong, if
        anything, with where this is."""
        problems: list[str] = []
        if request.environment == "docker":  # image progress and failures name this node
            import ray

            node = ray.util.get_node_ip_address()
            request = request.with_options(environment_args={"node": node, **request.environment_args})
        try:
            self.worker = AttemptWorker(request)
        except Exception as exc:
            problems = AttemptWorker.problems(request) or [f"{type(exc).__name__}: {exc}"]
        return {"host": socket.gethostname(), "pid": os.getpid(), "problems": problems}

    async def setup(self, environments: list[EnvironmentSpec], image_locks: Any = None) -> None:
        """Set the environment up; with ``image_locks`` (the run's :class:`~agentcompass_ray.images.BuildLocks`)
        the provider pulls-or-builds each image under the cluster's lock for it. What the set-up and the work it
        starts (the images built in the background) log at info level or above goes to :meth:`node_log`."""
        assert self.worker is not None
        worker = self.worker
        share = getattr(worker.provider, "share_builds", None)  # the docker provider's, with a registry
        if image_locks is not None and share is not None:
            import ray

            share(cluster_lock(image_locks, ray.get_runtime_context().get_node_id()))
        queue, loop = self._node_log_queue(), asyncio.get_running_loop()

        def send(level: str, event: str, fields: dict[str, Any]) -> None:  # builds may log from threads
            entry = (level, event, {k: sendable(v) for k, v in fields.items()})
            with contextlib.suppress(RuntimeError):  # the loop closed: the run is over
                loop.call_soon_threadsafe(queue.put_nowait, entry)

        with forwarded_warnings(send, levels=("info", *FORWARDED_LEVELS)):
            await worker.setup(environments)

    async def node_log(self) -> AsyncIterator[tuple[str, str, dict[str, Any]]]:
        """A streaming generator (``num_returns="streaming"``), called once: each event this node's set-up and
        the work it started log at info level or above — images pulled, built, pushed; a registry that failed —
        as ``(level, event, fields)``, as it happens, until :meth:`close`. The head writes them to the run's log,
        naming the node, so a node's image progress shows while it lasts."""
        queue = self._node_log_queue()
        while (entry := await queue.get()) is not None:
            yield entry

    def _node_log_queue(self) -> asyncio.Queue[tuple[str, str, dict[str, Any]] | None]:
        if self._node_log is None:
            self._node_log = asyncio.Queue()
        return self._node_log

    async def run(self, attempt: RemoteAttempt) -> AsyncIterator[tuple[str, Any]]:
        """Run one attempt; a streaming generator (``num_returns="streaming"``): each phase change and each
        warning the attempt logs as it happens, in order — ``("phase", (previous, new))``, ``("log", (level,
        event, fields))`` — then ``("outcome", RemoteOutcome)``. Cancelling it cancels the attempt's lifecycle
        and waits until its environments are closed."""
        assert self.worker is not None, "setup first"
        told: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        outcome: list[RemoteOutcome] = []

        async def attempt_run() -> None:
            assert self.worker is not None
            outcome.append(await self.worker.run(
                attempt, lambda prev, new: told.put_nowait(("phase", (prev, new))),
                lambda level, event, fields: told.put_nowait(("log", (level, event, fields)))))

        async for item in _relayed(attempt_run(), told):
            yield item
        yield "outcome", outcome[0]

    async def close(self) -> None:
        if self._node_log is not None:
            self._node_log.put_nowait(None)  # ends node_log
        if self.worker is not None:
            await self.worker.close()
            self.worker = None

    async def pid(self) -> int:
        return os.getpid()


async def _relayed(work: Coroutine[Any, Any, None], told: asyncio.Queue[tuple[str, Any]]
                   ) -> AsyncIterator[tuple[str, Any]]:
    """Run ``work`` and yield what it puts in ``told`` as it comes, in order, until it ends (its error raised
    after what it told). Closing the generator early cancels ``work`` and waits for it."""
    running = asyncio.ensure_future(work)
    try:
        while not running.done() or not told.empty():
            if told.empty():
                waiting = asyncio.ensure_future(told.get())
                await asyncio.wait([running, waiting], return_when=asyncio.FIRST_COMPLETED)
                if not waiting.done():
                    waiting.cancel()
                    continue
                yield waiting.result()
            else:
                yield told.get_nowait()
        running.result()
    finally:
        if not running.done():
            running.cancel()
            await asyncio.wait([running])  # an attempt's lifecycle closes its environments
