"""Which :class:`~agentcompass.models.access.CallSource` a run installs, from its request: ``--cache DIR``
(:mod:`agentcompass.models.call_cache`) and ``--replay RUN_DIR`` (:mod:`agentcompass.models.replay`).

Both decorate each attempt's role clients before they are metered (the cache nearest the live model, replay
outside it: a replay miss sent live may still be answered from the cache). :func:`default_seed` makes a
replay reuse the recorded run's seed (its (task, trial) seeds are in the recorded requests); :func:`provenance`
is what ``run.json`` records. The options are checked by :mod:`agentcompass.request_checks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentcompass.errors import UsageError
from agentcompass.models.access import CallSource
from agentcompass.models.call_cache import CacheSource, CallCache, parse_expiry
from agentcompass.models.faults import FaultSource
from agentcompass.models.replay import OfflineModel, Recording, Replay
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.seeds import new_run_seed
from agentcompass.runtime.types import RunRequest


def call_sources(req: RunRequest, models: Mapping[str, str]) -> tuple[CallSource, ...]:
    """The sources ``req`` asks for, in the order they wrap the live clients; ``models`` is each role's
    ``PROVIDER/NAME`` (part of a cache key)."""
    a = req.answers
    sources: list[CallSource] = []
    if a.cache:
        sources.append(CacheSource(CallCache.open(Path(a.cache), parse_expiry(a.cache_expiry)), dict(models)))
    if a.replay:
        sources.append(Replay(Recording.open(Path(a.replay)), miss=a.replay_miss, latency=a.replay_latency))
    if a.faults:  # outermost: a replayed faulted run gets its faults before the recording is asked
        sources.append(FaultSource.load(a.faults))
    return tuple(sources)


def default_seed(req: RunRequest) -> int:
    """The seed of a new run that gave none: the recorded run's when replaying, else a fresh one."""
    if req.answers.replay:
        seed = Recording.open(Path(req.answers.replay)).seed
        if seed is not None:
            return seed
    return new_run_seed()


def provenance(req: RunRequest) -> dict[str, object] | None:
    """What ``run.json`` records of where the run's answers came from (``None`` for a live run)."""
    a = req.answers
    if not (a.replay or a.cache or a.faults):
        return None
    out: dict[str, object] = {}
    if a.faults:
        out.update(FaultSource.load(a.faults).provenance())
    if a.cache:
        out["cache"] = {"dir": str(Path(a.cache).resolve()), "expiry_s": parse_expiry(a.cache_expiry)}
    if a.replay:
        try:
            run_id: str | None = Recording.open(Path(a.replay)).run_id
        except UsageError:
            run_id = None
        out["replay"] = {"run_dir": str(Path(a.replay).resolve()), "run_id": run_id, "miss": a.replay_miss,
                         "latency": a.replay_latency}
    return out


def replays_offline(req: RunRequest) -> bool:
    """The run replays and never asks a live model (``--replay`` without ``--replay-miss live``)."""
    return bool(req.answers.replay) and req.answers.replay_miss == "error"


def offline_client(req: RunRequest, role: str, name: str, why: str) -> ModelClient:
    """The stand-in for a role's model that cannot be built here (no key, no address) in a run that replays
    offline: it speaks the protocols the recording passed through for the role and takes a seed if the
    recorded client did (so the requests are the recorded ones), and is never asked."""
    assert req.answers.replay
    protocols, seeded = Recording.open(Path(req.answers.replay)).role_facts(role)
    return OfflineModel(name, protocols, seeded, why)
