"""A plugin for the tests: benchmarks whose phases misbehave on command, and a counting environment.

``scripted`` is a benchmark-driven benchmark. Its options (strings, as from ``--benchmark-arg``):

* ``n`` — number of tasks ``t0 .. t{n-1}`` (categories alternate ``even``/``odd``);
* ``sleep`` — seconds each run phase sleeps; ``calls`` — agent model calls per task (in-process client);
* ``mode`` — evaluation environment mode (``none``, ``reuse``, ``fresh``);
* ``faults`` — ``TASK:PHASE=BEHAVIOUR`` items separated by ``;``, e.g. ``t1:run=raise;t2:evaluate=hang``.
  Phases: ``prepare``, ``run``, ``collect``, ``evaluate``. Behaviours: ``raise``, ``infra`` (an
  InfrastructureError, retried), ``hang`` (sleeps an hour: only a timeout ends it), ``bad`` (returns the wrong
  type), ``status`` (run only: returns a RUN_ERROR result), ``chatty`` (run only: a 4-second command that prints
  a line every half second, then the ordinary run). ``PHASE=BEHAVIOUR@K`` misbehaves only in the first
  K attempts.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentcompass import hookimpl
from agentcompass.builtin.local import LocalProvider
from agentcompass.errors import InfrastructureError, UsageError
from agentcompass.runtime import (
    BaseBenchmark,
    HarnessFreeBenchmark,
    PreparedTask,
    RunResult,
    TaskSpec,
    TaskStatus,
)

PHASES = ("prepare", "run", "collect", "evaluate")
BEHAVIOURS = ("raise", "infra", "hang", "bad", "status", "chatty")


def parse_faults(text: str) -> dict[str, dict[str, tuple[str, int | None]]]:
    faults: dict[str, dict[str, tuple[str, int | None]]] = {}
    for item in filter(None, (s.strip() for s in text.split(";"))):
        task_id, _, rest = item.partition(":")
        phase, _, behaviour = rest.partition("=")
        behaviour, _, times = behaviour.partition("@")
        if phase not in PHASES or behaviour not in BEHAVIOURS:
            raise UsageError(f"bad fault {item!r}: phases {PHASES}, behaviours {BEHAVIOURS}")
        faults.setdefault(task_id, {})[phase] = (behaviour, int(times) if times else None)
    return faults


class ScriptedBenchmark(HarnessFreeBenchmark):
    name = "scripted"
    required_model_roles = ("agent",)

    def __init__(self, n: str = "4", sleep: str = "0", calls: str = "0", mode: str = "reuse", faults: str = "",
                 **unknown: Any) -> None:
        if unknown:
            raise UsageError(f"scripted: unknown option(s) {', '.join(unknown)}; known: n, sleep, calls, mode, faults")
        super().__init__()
        self.n, self.sleep, self.calls = int(n), float(sleep), int(calls)
        if mode not in ("none", "reuse", "fresh"):
            raise UsageError(f"scripted: mode must be none, reuse or fresh, not {mode!r}")
        self.evaluation_environment_mode = mode  # type: ignore[misc]
        # In mode reuse, evaluate reads answer.txt from the live environment: it cannot be scored again later.
        self.evaluate_needs_live_environment = mode == "reuse"  # type: ignore[misc]
        self.faults = parse_faults(faults)
        self.phase_calls: list[tuple[str, str, int]] = []

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        return [TaskSpec(task_id=f"t{i}", category="even" if i % 2 == 0 else "odd", data={"i": i})
                for i in range(self.n)]

    async def _maybe_fail(self, task: TaskSpec, phase: str, attempt: int) -> Any:
        self.phase_calls.append((task.task_id, phase, attempt))
        behaviour, times = self.faults.get(task.task_id, {}).get(phase, (None, None))
        if behaviour is None or (times is not None and attempt > times):
            return None
        if behaviour == "raise":
            raise RuntimeError(f"{phase} blew up on purpose")
        if behaviour == "infra":
            raise InfrastructureError(f"{phase} hit a flaky engine on purpose")
        if behaviour == "hang":
            await asyncio.sleep(3600)
        return behaviour

    async def prepare_task(self, task, req, plan, env=None):  # type: ignore[no-untyped-def]
        if await self._maybe_fail(task, "prepare", plan.attempt) == "bad":
            return {"not": "a PreparedTask"}
        await env.write_text("question.txt", f"task {task.task_id}")
        return PreparedTask(task_id=task.task_id, metadata={"question": "question.txt"})

    async def run_task(self, task, prepared, req, plan, env=None):  # type: ignore[no-untyped-def]
        behaviour = await self._maybe_fail(task, "run", plan.attempt)
        if behaviour == "bad":
            return "not a RunResult"
        if behaviour == "status":
            return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.RUN_ERROR,
                             error="the agent gave up")
        if behaviour == "chatty":  # quiet for 4 s but for a line of output every half second
            await env.exec(["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo tick; sleep 0.5; done"])
        if self.sleep:
            await asyncio.sleep(self.sleep)
        for _ in range(self.calls):
            await plan.models["agent"].chat([{"role": "user", "content": f"solve {task.task_id}"}])
        question = await env.read_text(prepared.metadata["question"])
        await env.write_text("answer.txt", question.upper())
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         final_answer=question.upper())

    async def collect_artifacts(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        if await self._maybe_fail(task, "collect", plan.attempt) == "bad":
            return None
        if result.status is TaskStatus.COMPLETED:
            await env.download("answer.txt", Path(plan.artifacts_dir) / "answer.txt")
        return replace(result, artifacts={**result.artifacts, "collected": True})

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        if await self._maybe_fail(task, "evaluate", plan.attempt) == "bad":
            return 42
        if result.status is not TaskStatus.COMPLETED:
            return replace(result, metrics={})
        mode = self.evaluation_environment_mode
        if mode == "none":
            assert env is None, "evaluate got an environment in mode none"
            answer = (Path(plan.artifacts_dir) / "answer.txt").read_text()
        elif mode == "fresh":
            assert not await _exists(env, "answer.txt"), "a fresh environment must not hold the run's files"
            answer = await env.read_text("artifacts/answer.txt")
        else:
            answer = await env.read_text("answer.txt")
        score = 1.0 if answer == f"TASK {task.task_id.upper()}" and task.data["i"] % 2 == 0 else 0.0
        return replace(result, metrics={"score": score})


async def _exists(env, path: str) -> bool:  # type: ignore[no-untyped-def]
    try:
        await env.read_bytes(path)
    except OSError:
        return False
    return True


class PlainBenchmark(BaseBenchmark):
    """An ordinary benchmark without reference solutions, for harness/benchmark fit errors."""

    name = "plain"

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        return [TaskSpec(task_id="only")]

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        return replace(result, metrics={"score": 1.0 if result.status is TaskStatus.COMPLETED else 0.0})


class BrokenBenchmark(BaseBenchmark):
    """A benchmark with a bug: ``where`` says where it fails (``init``, ``tasks``, ``spec``)."""

    name = "broken"

    def __init__(self, where: str = "tasks") -> None:
        super().__init__()
        if where == "init":
            raise FileNotFoundError("data/tasks.jsonl")
        self.where = where

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        if self.where == "tasks":
            raise KeyError("task_id")
        return [TaskSpec(task_id="a")]

    def environment_spec(self, task, req):  # type: ignore[no-untyped-def]
        raise RuntimeError("no image configured")


class CountingProvider(LocalProvider):
    """The real local environment, counting opens and closes, optionally failing the first opens or closing
    slowly (``close_delay`` seconds)."""

    #: Every instance made, newest last, so tests can inspect the one a run used.
    instances: list[CountingProvider] = []

    def __init__(self, fail_opens: str = "0", close_delay: str = "0", **options: Any) -> None:
        super().__init__(**options)
        CountingProvider.instances.append(self)
        self.fail_opens = int(fail_opens)
        #: Seconds each close takes (a slow clean-up, as a container's can be).
        self.close_delay = float(close_delay)
        self.opened = 0
        self.closed = 0
        self.open_sessions: set[Any] = set()
        #: The most sessions that were open at once.
        self.peak = 0

    async def open(self, spec, *, run_id, task_id, base_env):  # type: ignore[no-untyped-def]
        if self.fail_opens > 0:
            self.fail_opens -= 1
            raise InfrastructureError("engine hiccup on purpose")
        session = await super().open(spec, run_id=run_id, task_id=task_id, base_env=base_env)
        self.opened += 1
        self.open_sessions.add(session)
        self.peak = max(self.peak, len(self.open_sessions))
        return session

    async def close(self, session):  # type: ignore[no-untyped-def]
        self.closed += 1
        self.open_sessions.discard(session)
        if self.close_delay:
            await asyncio.sleep(self.close_delay)
        await super().close(session)


def _seed_benchmark(**options: Any) -> Any:
    from tests.helpers.seed_benchmark import ExampleInteractiveBenchmark

    return ExampleInteractiveBenchmark(**options)


@hookimpl
def register_benchmarks(register):  # type: ignore[no-untyped-def]
    register("scripted", ScriptedBenchmark)
    register("plain", PlainBenchmark)
    register("broken", BrokenBenchmark)
    register("seed_interactive", _seed_benchmark)


@hookimpl
def register_environments(register):  # type: ignore[no-untyped-def]
    register("counting", CountingProvider)
