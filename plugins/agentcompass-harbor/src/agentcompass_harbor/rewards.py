"""Reading the verifier's reward, as Harbor 0.25's verifier does (``harbor.verifier.verifier``).

``/logs/verifier/reward.json`` wins when it exists (a flat JSON object of numbers: each key a metric), else
``/logs/verifier/reward.txt`` (one number: the ``reward``). The primary metric is ``reward``: the key of that
name, or the only key of a one-key ``reward.json``. An empty file, a value that is not a number (``true``
and ``"1"`` are not numbers), a non-finite one (``NaN``, ``Infinity``, ``1e999``) or a ``reward.json`` with
several keys but no ``reward`` is a :class:`RewardError`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

REWARD_TXT = "reward.txt"
REWARD_JSON = "reward.json"
PRIMARY = "reward"


class RewardError(ValueError):
    """The verifier's reward file is missing or invalid."""


def _finite(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RewardError(f"{where}: {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise RewardError(f"{where}: {value!r} is not a finite number")
    return number


def _reject_constant(name: str) -> float:
    raise RewardError(f"{REWARD_JSON}: {name} is not a finite number")


def parse_reward_json(text: str) -> dict[str, float]:
    if not text.strip():
        raise RewardError(f"{REWARD_JSON} is empty")
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise RewardError(f"{REWARD_JSON} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise RewardError(f"{REWARD_JSON} must be a non-empty JSON object of numbers, got {text.strip()[:200]!r}")
    rewards = {str(key): _finite(value, f"{REWARD_JSON} key {key!r}") for key, value in data.items()}
    if PRIMARY not in rewards:
        if len(rewards) != 1:
            raise RewardError(f"{REWARD_JSON} has no {PRIMARY!r} key (its keys: {', '.join(sorted(rewards))}); "
                              f"the primary metric is {PRIMARY!r}")
        rewards[PRIMARY] = next(iter(rewards.values()))
    return rewards


def parse_reward_txt(text: str) -> dict[str, float]:
    if not text.strip():
        raise RewardError(f"{REWARD_TXT} is empty")
    try:
        value = float(text.strip())
    except ValueError:
        raise RewardError(f"{REWARD_TXT} does not hold a number: {text.strip()[:200]!r}") from None
    return {PRIMARY: _finite(value, REWARD_TXT)}


def read_rewards(verifier_dir: Path) -> tuple[dict[str, float], str]:
    """The rewards in a copy of ``/logs/verifier`` on the host, and the file they came from."""
    for name, parse in ((REWARD_JSON, parse_reward_json), (REWARD_TXT, parse_reward_txt)):
        path = verifier_dir / name
        if path.is_file():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise RewardError(f"cannot read {name}: {exc}") from None
            return parse(text), name
    raise RewardError(f"no reward file: the verifier wrote neither /logs/verifier/{REWARD_TXT} nor {REWARD_JSON}")
