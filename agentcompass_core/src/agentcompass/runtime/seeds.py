"""Deterministic seeds: one for a run, one derived from it for every (task, trial).

A derived seed depends only on the run's seed, the task id and the trial number — not on the order tasks run
in, the machine, or the Python version — so a resume, a re-run with the same ``--seed`` and another machine
give every (task, trial) the same seed.
"""

from __future__ import annotations

import hashlib
import secrets

#: Seeds are non-negative and below this (they fit the ``seed`` field of every OpenAI-style API).
SEED_LIMIT = 2**31


def new_run_seed() -> int:
    """A fresh run seed, for a run started without ``--seed`` (the runner records it)."""
    return secrets.randbelow(SEED_LIMIT)


def trial_seed(run_seed: int, task_id: str, trial: int) -> int:
    """The seed of one (task, trial) of a run."""
    digest = hashlib.sha256(f"{run_seed}\0{task_id}\0{trial}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % SEED_LIMIT
