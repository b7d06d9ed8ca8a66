"""A benchmark whose tasks run shell commands in their environment, for the local environment's CLI tests.

``shell`` options (strings, as from ``--benchmark-arg``):

* ``n`` — number of tasks ``t0 .. t{n-1}``;
* ``command`` — what each task runs with ``sh -c`` (``{task}`` is replaced by the task id);
* ``loop`` — ``true``: run the command again and again until the run phase is cancelled (by ``--timeout``
  or an interrupt);
* ``exec_timeout`` — seconds passed to ``exec`` (default: none);
* ``artifact`` — a path downloaded into the task's artifacts after the run (default: none).

Run it through the real CLI with ``python -m tests.helpers.shell_cli run shell none mock ...``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentcompass import hookimpl
from agentcompass.errors import UsageError
from agentcompass.runtime import HarnessFreeBenchmark, RunResult, TaskSpec, TaskStatus


class ShellBenchmark(HarnessFreeBenchmark):
    name = "shell"
    required_model_roles = ("agent",)

    def __init__(self, n: str = "1", command: str = "true", loop: str = "false", exec_timeout: str = "",
                 artifact: str = "", **unknown: Any) -> None:
        if unknown:
            raise UsageError(f"shell: unknown option(s) {', '.join(unknown)}")
        super().__init__()
        self.n, self.command, self.loop = int(n), command, loop == "true"
        self.exec_timeout = float(exec_timeout) if exec_timeout else None
        self.artifact = artifact

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        return [TaskSpec(task_id=f"t{i}") for i in range(self.n)]

    async def run_task(self, task, prepared, req, plan, env=None):  # type: ignore[no-untyped-def]
        command = self.command.replace("{task}", task.task_id)
        while True:
            result = await env.exec(["sh", "-c", command], timeout=self.exec_timeout)
            if not self.loop:
                break
        if self.artifact:
            await env.download(self.artifact, Path(plan.artifacts_dir) / Path(self.artifact).name)
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         final_answer=result.stdout, artifacts={"returncode": result.returncode})

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        from dataclasses import replace

        return replace(result, metrics={"score": 1.0 if result.status is TaskStatus.COMPLETED else 0.0})


@hookimpl
def register_benchmarks(register):  # type: ignore[no-untyped-def]
    register("shell", ShellBenchmark)
