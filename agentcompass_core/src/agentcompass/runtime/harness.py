"""Harnesses: the agent loop that drives a model on a task."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from agentcompass.runtime.benchmark import BaseBenchmark
from agentcompass.runtime.environment import EnvironmentSession
from agentcompass.runtime.types import (
    EnvironmentSpec,
    ExecutionPlan,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
)


def check_options(harness: str, options: Mapping[str, Any], known: Iterable[str]) -> None:
    """Raise :class:`~agentcompass.errors.UsageError` naming the options ``harness`` does not know and the ones
    it does (``--harness-arg`` keys are never silently ignored)."""
    from agentcompass.errors import UsageError

    known = tuple(known)
    unknown = sorted(set(options) - set(known))
    if unknown:
        valid = f"valid options: {', '.join(known)}" if known else "it takes no options"
        raise UsageError(f"unknown option(s) {', '.join(repr(o) for o in unknown)} for harness {harness!r}; {valid}")


class BaseHarness:
    """Base class of every harness.

    ``run`` gets the prepared task and the live environment and returns a ``RunResult`` (status
    ``COMPLETED`` when the loop ended normally, whatever the answer's quality). Use ``plan.models["agent"]``
    for in-process model calls, or ``plan.model_endpoints["agent"].env()`` for a program in the environment.
    """

    name: ClassVar[str] = ""
    #: The ``--harness-arg`` keys this harness takes: any other is refused (:func:`check_options`) when the
    #: object is made. ``None``: the subclass checks its options itself.
    known_options: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, **options: Any) -> None:
        if self.known_options is not None:
            check_options(self.name, options, self.known_options)
        self.options = options
        self.benchmark: BaseBenchmark | None = None

    def bind(self, benchmark: BaseBenchmark) -> None:
        """Called by the runtime after :meth:`check_compatible`, before any task: the benchmark this harness
        will run. Harnesses that need benchmark hooks (``oracle``) use ``self.benchmark``."""
        self.benchmark = benchmark

    def check_compatible(self, benchmark: BaseBenchmark) -> None:
        """Raise :class:`~agentcompass.errors.UsageError` if this harness cannot run ``benchmark``.
        Called before any work starts."""
        from agentcompass.errors import UsageError
        from agentcompass.runtime.benchmark import HarnessFreeBenchmark

        if isinstance(benchmark, HarnessFreeBenchmark):
            raise UsageError(
                f"benchmark {benchmark.name!r} drives its own loop; run it with the harness 'none' "
                f"instead of {self.name!r}"
            )

    def environment_spec(self, spec: EnvironmentSpec, task: TaskSpec, req: RunRequest) -> EnvironmentSpec:
        """The environment ``task`` runs in under this harness, given the one its benchmark asks for
        (``spec``). Called once per task before any task starts (images are built from the result).

        Default: ``spec`` unchanged. A harness that brings software of its own into the task's environment
        (an installed agent CLI) returns a spec derived from ``spec``, e.g. an image built ``FROM`` it; it
        must keep what the benchmark asked for (network, limits, working directory, user).
        """
        return spec

    async def run(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        raise NotImplementedError(f"{type(self).__name__} must implement run()")
