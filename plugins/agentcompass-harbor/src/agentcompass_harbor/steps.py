"""A multi-step task's reward from its steps', as Harbor 0.25 computes it (``harbor.trial.multi_step``,
``Trial._select_multi_step_reward``).

* ``mean`` (the default): each reward key's mean over the steps that have a verifier result, a key a step lacks
  counting 0 — steps whose verifier failed, and steps never run, are left out of the denominator;
* ``final``: the last step's rewards as they are.

The steps stop after one whose verifier failed, or whose rewards are under its ``min_reward`` (a number: the
``reward`` key; a table: each key, a missing key counting as minus infinity).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


class NoStepReward(RuntimeError):
    """No step has a verifier result: the task has no reward."""


def combine(records: Sequence[Mapping[str, Any]], strategy: str) -> dict[str, float]:
    """The task's rewards from its steps' records (``{"name", "rewards"}`` or ``{"name", "error"}``)."""
    if not records:
        raise NoStepReward("no step ran")
    if strategy == "final":
        last = records[-1]
        if "rewards" not in last:
            raise NoStepReward(f"the last step ({last['name']}) has no reward: {last.get('error', '')}")
        return dict(last["rewards"])
    verified = [dict(r["rewards"]) for r in records if "rewards" in r]
    if not verified:
        errors = "; ".join(f"{r['name']}: {r.get('error', '')}" for r in records)
        raise NoStepReward(f"no step has a reward ({errors})")
    keys = sorted({k for rewards in verified for k in rewards})
    return {k: sum(rewards.get(k, 0.0) for rewards in verified) / len(verified) for k in keys}


def stop_reason(record: Mapping[str, Any], min_reward: float | Mapping[str, float] | None) -> str | None:
    """Why the steps after ``record``'s do not run, or ``None``."""
    if "rewards" not in record:
        return "its verifier failed"
    if min_reward is None:
        return None
    thresholds = {"reward": min_reward} if isinstance(min_reward, (int, float)) else dict(min_reward)
    rewards = record["rewards"]
    for key, threshold in thresholds.items():
        actual = rewards.get(key, -math.inf)
        if actual < threshold:
            return f"{key}={actual} below min_reward {threshold}"
    return None
