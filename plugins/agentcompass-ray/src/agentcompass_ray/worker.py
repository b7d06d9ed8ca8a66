"""The Ray actor that runs a run's attempts on one node: an async actor, many attempts at once.

One actor per node and run: the plugins are imported and the environment provider set up once (images built
once per node), then every attempt the head sends runs through the ordinary lifecycle on the actor's event
loop. Cancelling an attempt's Ray task cancels its lifecycle, which closes its environments.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from typing import Any

from agentcompass.runtime.remote import AttemptWorker, RemoteAttempt, RemoteOutcome
from agentcompass.runtime.types import EnvironmentSpec, RunRequest


class NodeWorker:
    """Ray actor body (wrapped with ``ray.remote`` by the executor)."""

    def __init__(self) -> None:
        self.worker: AttemptWorker | None = None

    async def check(self, request: RunRequest) -> dict[str, Any]:
        """Load the plugins and build the run's benchmark, harness and environment here; what went wrong, if
        anything, with where this is."""
        problems: list[str] = []
        try:
            self.worker = AttemptWorker(request)
        except Exception as exc:
            problems = AttemptWorker.problems(request) or [f"{type(exc).__name__}: {exc}"]
        return {"host": socket.gethostname(), "pid": os.getpid(), "problems": problems}

    async def setup(self, environments: list[EnvironmentSpec]) -> None:
        assert self.worker is not None
        await self.worker.setup(environments)

    async def run(self, attempt: RemoteAttempt) -> AsyncIterator[tuple[str, Any]]:
        """Run one attempt; a streaming generator (``num_returns="streaming"``): each phase change as it
        happens, ``("phase", (previous, new))``, then ``("outcome", RemoteOutcome)``. Cancelling it cancels
        the attempt's lifecycle and waits until its environments are closed."""
        assert self.worker is not None, "setup first"
        changes: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        running = asyncio.ensure_future(self.worker.run(attempt, lambda prev, new: changes.put_nowait((prev, new))))
        try:
            while not running.done() or not changes.empty():
                if changes.empty():
                    waiting = asyncio.ensure_future(changes.get())
                    await asyncio.wait([running, waiting], return_when=asyncio.FIRST_COMPLETED)
                    if not waiting.done():
                        waiting.cancel()
                        continue
                    yield "phase", waiting.result()
                else:
                    yield "phase", changes.get_nowait()
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
