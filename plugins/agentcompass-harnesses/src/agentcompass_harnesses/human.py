"""The ``human`` harness: a person is the agent, at a shell in the task's environment.

::

    agentcompass run harbor human mock -b path=tasks -t hello --env docker

For each task it shows the instruction, opens an interactive shell in the environment the agent would get
(:meth:`~agentcompass.runtime.environment.EnvironmentSession.shell_command`: ``local`` and ``docker`` offer one) on
this terminal, and when the person leaves it (``exit`` or Ctrl-D) the attempt is collected and evaluated as any
agent's. The session is recorded in the attempt's artifacts as ``session.cast`` (asciicast v2, timing kept: what
was shown and what was typed); ``agentcompass report`` plays it beside the result.

Attempts take the terminal one at a time. The run phase's ``--timeout`` (3600 s by default) bounds a session;
a person at the shell counts as a sign of life for the stall watchdog. No model is called: give ``mock``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime.environment import EnvironmentSession
from agentcompass.runtime.harness import BaseHarness
from agentcompass.runtime.liveness import sign_of_life
from agentcompass.runtime.types import ExecutionPlan, PreparedTask, RunRequest, RunResult, TaskSpec, TaskStatus

from agentcompass_harnesses import common
from agentcompass_harnesses.asciicast import relay

#: The recording's name in the attempt's artifacts.
RECORDING = "session.cast"

_terminals: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}  # one session on the terminal at a time, per loop


async def _take_terminal() -> asyncio.Lock:
    """Wait for the terminal (another attempt's session may hold it); waiting is a sign of life."""
    lock = _terminals.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    while True:
        try:
            await asyncio.wait_for(lock.acquire(), 5)
            return lock
        except TimeoutError:
            sign_of_life("waiting for the terminal (another task's session has it)")


def banner(task_id: str, instruction: str) -> str:
    """What the person reads before the shell opens."""
    rule = "=" * 72
    return (f"{rule}\ntask {task_id}: your instruction\n{rule}\n{instruction.rstrip()}\n{rule}\n"
            "A shell in the task's environment follows. Solve the task, then type 'exit' (or Ctrl-D) to have it "
            f"scored.\n{rule}\n")


class HumanHarness(BaseHarness):
    """``human``: the attempt is a person's session at a shell in the task's environment, recorded."""

    name = "human"
    known_options = ()

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if not os.isatty(0):
            raise UsageError("the human harness needs a terminal on stdin: run agentcompass in one (or in tmux)")

    async def run(self, task: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
                  env: EnvironmentSession | None = None) -> RunResult:
        command = env.shell_command() if env is not None else None
        if command is None:
            raise UsageError(f"the human harness needs an environment with an interactive shell; "
                             f"{req.environment!r} offers none (use --env docker or --env local)")
        text = common.instruction(self.benchmark, task, prepared)
        cast = Path(plan.artifacts_dir) / RECORDING
        stop = threading.Event()

        def session() -> int:
            return relay(command, cast, title=f"{req.benchmark} {task.task_id}", banner=banner(task.task_id, text),
                         stop=stop, on_activity=lambda: sign_of_life("a person at the shell"))

        terminal = await _take_terminal()
        try:
            running = asyncio.ensure_future(asyncio.to_thread(session))
            try:
                status = await asyncio.shield(running)
            except asyncio.CancelledError:  # a timeout or ctl: end the session, give the terminal back, then go
                stop.set()
                with contextlib.suppress(Exception):
                    await running
                raise
        finally:
            terminal.release()
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         artifacts={"recording": RECORDING, "shell_exit_status": status})
