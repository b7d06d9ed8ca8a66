"""The Ray actor that runs a run's attempts on one node: an async actor, many attempts at once.

One actor per node and run: the plugins are imported and the environment provider set up once (images built
once per node, or once per cluster with a registry), then every attempt the head sends runs through the
ordinary lifecycle on the actor's event loop. Cancelling an attempt's Ray task cancels its lifecycle, which
closes its environments.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from typing import Any

from agentcompass.runtime.remote import AttemptWorker, RemoteAttempt, RemoteOutcome
from agentcompass.runtime.types import EnvironmentSpec, RunRequest

from agentcompass_ray.images import cluster_lock


class NodeWorker:
    """Ray actor body (wrapped with ``ray.remote`` by the executor)."""

    def __init__(self) -> None:
        self.worker: AttemptWorker | None = None

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
        the provider pulls-or-builds each image under the cluster's lock for it."""
        assert self.worker is not None
        share = getattr(self.worker.provider, "share_builds", None)  # the docker provider's, with a registry
        if image_locks is not None and share is not None:
            import ray

            share(cluster_lock(image_locks, ray.get_runtime_context().get_node_id()))
        await self.worker.setup(environments)

    async def run(self, attempt: RemoteAttempt) -> AsyncIterator[tuple[str, Any]]:
        """Run one attempt; a streaming generator (``num_returns="streaming"``): each phase change and each
        warning the attempt logs as it happens, in order — ``("phase", (previous, new))``, ``("log", (level,
        event, fields))`` — then ``("outcome", RemoteOutcome)``. Cancelling it cancels the attempt's lifecycle
        and waits until its environments are closed."""
        assert self.worker is not None, "setup first"
        told: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        running = asyncio.ensure_future(self.worker.run(
            attempt, lambda prev, new: told.put_nowait(("phase", (prev, new))),
            lambda level, event, fields: told.put_nowait(("log", (level, event, fields)))))
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
            outcome: RemoteOutcome = running.result()
            yield "outcome", outcome
        finally:
            if not running.done():
                running.cancel()
                await asyncio.wait([running])  # its lifecycle closes its environments

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.close()
            self.worker = None

    async def pid(self) -> int:
        return os.getpid()
