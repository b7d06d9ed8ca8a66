"""A rule-based, deterministic user simulator.

Standard library only: this module is copied into the task environment and run there.

The user follows a script: a first message, then one follow-up each time the agent hands the turn back
without the goal being met. It says :data:`STOP` as soon as its goal is met, after the agent transferred it
to a human, or when it has nothing left to say.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

STOP = "###STOP###"

#: Why the user stopped.
GOAL_MET = "goal_met"
TRANSFERRED = "transferred"
SCRIPT_EXHAUSTED = "script_exhausted"


class UserSimulator:
    """The user of one task.

    :param script: ``{"first_message": str, "follow_ups": [str, ...]}``.
    :param goal_met: called with no argument after every agent reply; ``True`` when the user got what they
        wanted. ``None``: the goal is never met early, the script runs to its end.
    """

    def __init__(self, script: Mapping[str, Any], goal_met: Callable[[], bool] | None = None) -> None:
        first = script.get("first_message")
        if not isinstance(first, str) or not first.strip():
            raise ValueError("a user script needs a non-empty 'first_message'")
        follow_ups = script.get("follow_ups") or []
        if not all(isinstance(f, str) and f.strip() for f in follow_ups):
            raise ValueError("'follow_ups' must be non-empty strings")
        self._first = first
        self._follow_ups: list[str] = list(follow_ups)
        self._next = 0
        self._goal_met = goal_met
        self.stop_reason: str | None = None

    def first_message(self) -> str:
        return self._first

    @property
    def stopped(self) -> bool:
        return self.stop_reason is not None

    def respond(self, agent_message: str = "", *, transferred: bool = False) -> str:
        """The user's next message after the agent's reply ``agent_message`` (unused: the user is
        scripted, which keeps every run reproducible)."""
        _ = agent_message
        if self.stop_reason is not None:
            return STOP
        if transferred:
            self.stop_reason = TRANSFERRED
        elif self._goal_met is not None and self._goal_met():
            self.stop_reason = GOAL_MET
        elif self._next < len(self._follow_ups):
            message = self._follow_ups[self._next]
            self._next += 1
            return message
        else:
            self.stop_reason = SCRIPT_EXHAUSTED
        return STOP
