"""The phases of a task attempt, the transitions between them, and the default seconds each may take.

::

    PENDING → PREPARING → RUNNING → COLLECTING → EVALUATING → FINISHED
                  ↓           ↓          ↓            ↓
            PREPARE_ERROR  RUN_ERROR  RUN_ERROR    EVAL_ERROR

The lifecycle (:mod:`agentcompass.lifecycle`) walks an attempt through these phases; observers see them as
``TaskEvent.phase`` and ``TaskEvent.previous`` (the phase's ``value``).
"""

from __future__ import annotations

import enum

#: Seconds allowed per phase unless the request says otherwise (``run`` comes from ``--timeout``).
DEFAULT_TIMEOUTS: dict[str, float | None] = {
    "environment": 300.0,
    "prepare": 600.0,
    "run": 3600.0,
    "collect": 300.0,
    "evaluate": 600.0,
    "close": 60.0,
}


class Phase(enum.Enum):
    PENDING = "PENDING"
    PREPARING = "PREPARING"
    RUNNING = "RUNNING"
    COLLECTING = "COLLECTING"
    EVALUATING = "EVALUATING"
    FINISHED = "FINISHED"


TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    # PENDING → EVALUATING: ``agentcompass evaluate`` scores a recorded result again, and runs nothing else.
    Phase.PENDING: frozenset({Phase.PREPARING, Phase.EVALUATING, Phase.FINISHED}),
    Phase.PREPARING: frozenset({Phase.RUNNING, Phase.FINISHED}),
    Phase.RUNNING: frozenset({Phase.COLLECTING, Phase.FINISHED}),
    Phase.COLLECTING: frozenset({Phase.EVALUATING, Phase.FINISHED}),
    Phase.EVALUATING: frozenset({Phase.FINISHED}),
    Phase.FINISHED: frozenset(),
}

#: How ``RunResult.error_phase`` names each phase.
PHASE_NAMES: dict[Phase, str] = {
    Phase.PREPARING: "prepare",
    Phase.RUNNING: "run",
    Phase.COLLECTING: "collect",
    Phase.EVALUATING: "evaluate",
}


class IllegalTransition(RuntimeError):
    """A transition the state machine does not allow: a bug in the runtime, never user error."""
