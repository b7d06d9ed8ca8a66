"""A run steered while it runs: its control server and :class:`~agentcompass.control.steering.Steering`, for the
span of its attempts (the runner's one entry point into :mod:`agentcompass.control`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from agentcompass.attempts import AttemptQueue
from agentcompass.control.server import ControlServer
from agentcompass.control.steering import Steering
from agentcompass.models.budget import RunBudget
from agentcompass.runtime.executor import AttemptSource
from agentcompass.runtime.types import TaskSpec
from agentcompass.supervision import Supervisor


@contextlib.asynccontextmanager
async def steered(run_dir: Path, *, run_id: str, source: AttemptSource, queue: AttemptQueue,
                  supervisor: Supervisor, budget: RunBudget, tasks: Mapping[str, TaskSpec], trials: int,
                  n_work: int, concurrency: int, log: Any, notify: Callable[..., None]) -> AsyncIterator[Steering]:
    """Serve ``agentcompass ctl`` for ``run_dir`` while the block runs; hand the executor ``steering.attempts``.
    Each action is logged (``control.action`` in ``logs.jsonl``: who by uid, when) and announced to the observers
    (``agentcompass_run_control``: the console prints it)."""

    def on_action(action: str, uid: int, fields: dict[str, Any]) -> None:
        log.info("control.action", action=action, uid=uid, **fields)
        notify("agentcompass_run_control", run_id=run_id, action=action, uid=uid, message=fields["result"])

    def on_event(event: str, fields: dict[str, Any]) -> None:
        log.warning(event, **fields)

    steering = Steering.around(source, queue, concurrency, run_id=run_id, supervisor=supervisor, budget=budget,
                               tasks=tasks, trials=trials, n_work=n_work, on_action=on_action)
    server = ControlServer(run_dir, steering.handle, on_event=on_event)
    await server.start()
    try:
        yield steering
    finally:
        await server.stop()
