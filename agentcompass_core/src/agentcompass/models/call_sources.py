"""Which :class:`~agentcompass.models.access.CallSource` a run installs, from its request: ``--cache DIR``
(:mod:`agentcompass.models.call_cache`) and ``--replay RUN_DIR`` (:mod:`agentcompass.models.replay`).

Both decorate each attempt's role clients before they are metered (the cache nearest the live model, replay
outside it: a replay miss sent live may still be answered from the cache). :func:`check` validates the
options before anything is built; :func:`default_seed` makes a replay reuse the recorded run's seed (its
(task, trial) seeds are in the recorded requests); :func:`provenance` is what ``run.json`` records.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentcompass.errors import UsageError
from agentcompass.models.access import CallSource
from agentcompass.models.call_cache import CacheSource, CallCache, parse_expiry
from agentcompass.models.replay import MISS_MODES, OfflineModel, Recording, Replay
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.seeds import new_run_seed
from agentcompass.runtime.types import RunRequest


def check(req: RunRequest) -> None:
    """Each replay and cache option, checked alone (a :class:`UsageError` naming the bad one)."""
    if req.replay_miss not in MISS_MODES:
        raise UsageError(f"--replay-miss {req.replay_miss!r}: use one of {', '.join(MISS_MODES)}")
    parse_expiry(req.cache_expiry)
    if req.replay:
        Recording.open(Path(req.replay))


def check_together(req: RunRequest) -> None:
    """The options that need another: ``--replay-miss`` and ``--replay-latency`` need ``--replay``,
    ``--cache-expiry`` needs ``--cache``."""
    if not req.replay and (req.replay_miss != "error" or req.replay_latency):
        given = "--replay-miss" if req.replay_miss != "error" else "--replay-latency"
        raise UsageError(f"{given} needs --replay RUN_DIR (the run whose model calls answer this one)")
    if req.cache_expiry is not None and not req.cache:
        raise UsageError("--cache-expiry needs --cache DIR")


def call_sources(req: RunRequest, models: Mapping[str, str]) -> tuple[CallSource, ...]:
    """The sources ``req`` asks for, in the order they wrap the live clients; ``models`` is each role's
    ``PROVIDER/NAME`` (part of a cache key)."""
    sources: list[CallSource] = []
    if req.cache:
        sources.append(CacheSource(CallCache.open(Path(req.cache), parse_expiry(req.cache_expiry)), dict(models)))
    if req.replay:
        sources.append(Replay(Recording.open(Path(req.replay)), miss=req.replay_miss, latency=req.replay_latency))
    return tuple(sources)


def default_seed(req: RunRequest) -> int:
    """The seed of a new run that gave none: the recorded run's when replaying, else a fresh one."""
    if req.replay:
        seed = Recording.open(Path(req.replay)).seed
        if seed is not None:
            return seed
    return new_run_seed()


def provenance(req: RunRequest) -> dict[str, object] | None:
    """What ``run.json`` records of where the run's answers came from (``None`` for a live run)."""
    if not (req.replay or req.cache):
        return None
    out: dict[str, object] = {}
    if req.cache:
        out["cache"] = {"dir": str(Path(req.cache).resolve()), "expiry_s": parse_expiry(req.cache_expiry)}
    if req.replay:
        try:
            run_id: str | None = Recording.open(Path(req.replay)).run_id
        except UsageError:
            run_id = None
        out["replay"] = {"run_dir": str(Path(req.replay).resolve()), "run_id": run_id, "miss": req.replay_miss,
                         "latency": req.replay_latency}
    return out


def replays_offline(req: RunRequest) -> bool:
    """The run replays and never asks a live model (``--replay`` without ``--replay-miss live``)."""
    return bool(req.replay) and req.replay_miss == "error"


def offline_client(req: RunRequest, role: str, name: str, why: str) -> ModelClient:
    """The stand-in for a role's model that cannot be built here (no key, no address) in a run that replays
    offline: it speaks the protocols the recording passed through for the role and takes a seed if the
    recorded client did (so the requests are the recorded ones), and is never asked."""
    assert req.replay
    protocols, seeded = Recording.open(Path(req.replay)).role_facts(role)
    return OfflineModel(name, protocols, seeded, why)
