"""Harnesses: the agent loop that drives a model on a task."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class AttemptLimits:
    """What one task attempt of a harness may spend on the agent model: ``max_calls`` model calls and
    ``max_tokens`` tokens (prompt and completion, summed over its calls); ``None``: no limit of the harness's
    own. The run's meter refuses the call past either, and the attempt ends as ``LIMIT_REACHED`` naming it
    (``--max-tokens-per-task`` and ``--max-cost`` still apply as well)."""

    max_calls: int | None = None
    max_tokens: int | None = None

    def describe(self) -> str:
        """``"200 calls, 4,000,000 tokens per attempt"`` (what ``plugins list`` and the READMEs show)."""
        parts = [f"{self.max_calls:,} calls" if self.max_calls else "",
                 f"{self.max_tokens:,} tokens" if self.max_tokens else ""]
        shown = ", ".join(p for p in parts if p)
        return f"{shown} per attempt" if shown else "no limit"


#: The options by which a user changes a harness's :class:`AttemptLimits` (``0`` or ``none``: no limit).
LIMIT_OPTIONS = ("max_calls", "max_tokens")


def limits_from_options(harness: str, options: Mapping[str, Any], defaults: AttemptLimits) -> AttemptLimits:
    """``defaults`` changed by ``--harness-arg max_calls=N`` / ``max_tokens=N`` (a whole number; ``0`` or
    ``none`` lifts the limit); anything else is a :class:`~agentcompass.errors.UsageError`."""
    from agentcompass.errors import UsageError

    values: dict[str, int | None] = {"max_calls": defaults.max_calls, "max_tokens": defaults.max_tokens}
    for key in LIMIT_OPTIONS:
        if key not in options:
            continue
        raw = str(options[key]).strip().replace("_", "")
        if raw.lower() in ("0", "none"):
            values[key] = None
            continue
        try:
            number = int(raw)
        except ValueError:
            number = -1
        if number < 1:
            raise UsageError(f"harness {harness!r}: option {key!r} must be a whole number of at least 1, or 0 (no "
                             f"limit), got {options[key]!r}")
        values[key] = number
    return AttemptLimits(**values)


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
    #: The limits an attempt of this harness has unless its options say otherwise (:meth:`attempt_limits`).
    default_limits: ClassVar[AttemptLimits] = AttemptLimits()

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

    def attempt_limits(self) -> AttemptLimits:
        """The limits of each attempt of this harness (:class:`AttemptLimits`), read by the runtime before the
        attempt starts: :attr:`default_limits`, unless the harness's options change them. The runtime's meter
        enforces them (every agent call, in process or through the gateway, counts)."""
        return self.default_limits

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
