"""The Ray actor that runs a run's attempts on one node: an async actor, many attempts at once.

One actor per node and run: the plugins are imported and the environment provider set up once (images built
once per node), then every attempt the head sends runs through the ordinary lifecycle on the actor's event
loop. Cancelling an attempt's Ray task cancels its lifecycle, which closes its environments.
"""

from __future__ import annotations

import os
import socket
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

    async def run(self, attempt: RemoteAttempt) -> RemoteOutcome:
        assert self.worker is not None, "setup first"
        return await self.worker.run(attempt)

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.close()
            self.worker = None

    async def pid(self) -> int:
        return os.getpid()
