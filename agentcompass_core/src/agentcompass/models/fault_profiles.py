"""``--faults PROFILE``: what a fault profile holds, the built-in profiles, and which fault a call gets.

A profile is a TOML file (or a built-in name: :data:`BUILTIN_PROFILES`) of rates per role::

    [default]               # every role
    rate_limit = 0.1        # HTTP 429 with Retry-After (retry_after seconds)
    retry_after = 1
    server_error = 0.05     # HTTP 500 or 503 (half each)
    connection_reset = 0.02 # the connection dropped before any answer
    timeout = 0.01          # no answer for timeout_after seconds, then the connection dropped
    timeout_after = 30
    stream_cut = 0.1        # a streamed answer's connection dropped after cut_after events
    cut_after = 3
    bad_tool_json = 0.1     # the answer's tool-call arguments made invalid JSON
    empty_answer = 0.05     # an empty answer (no text, no tool call)
    latency = 0.5           # seconds added to a call (latency_rate of the calls; latency_tail "fixed" or
    latency_rate = 1.0      # "pareto": heavy-tailed, latency the scale, a tenth of the calls 10x or more)
    latency_tail = "fixed"

    [agent]                 # a role's own rates (the others are the default's)
    rate_limit = 0.2

A call gets at most one fault of the failure kinds (drawn in the order of :data:`FAULT_KINDS`) and, on its own
draw, added latency. The draw is a pure function of the (task, trial)'s seed — itself the run's seed's — the
role and the call's position among the role's calls in the attempt (:func:`fault_for`): the same run with the
same seed gets the same faults, so a faulted run replays.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from agentcompass.errors import UsageError

#: The failure kinds, in the order a call's draw tries them.
FAULT_KINDS = ("rate_limit", "server_error", "connection_reset", "timeout", "stream_cut", "bad_tool_json",
               "empty_answer")
#: Kinds that never reach the provider: the fault replaces its answer (a replay skips their recorded calls).
REPLACING_KINDS = frozenset({"rate_limit", "server_error", "connection_reset", "timeout", "empty_answer"})
#: Kinds that drop the agent's connection (it sees a reset, not an HTTP answer).
DROPPING_KINDS = frozenset({"connection_reset", "timeout", "stream_cut"})
LATENCY_TAILS = ("fixed", "pareto")
#: Shape of the heavy tail: P(delay > k * latency) = k ** -PARETO_ALPHA (a tenth of the calls 10x or more, at most 30x).
PARETO_ALPHA = 1.0
#: The heavy tail is cut at this many times the latency (a run must end).
PARETO_CAP = 30.0


@dataclass(frozen=True)
class FaultRates:
    """One role's rates (each the share of its calls, 0 to 1) and the faults' settings."""

    rate_limit: float = 0.0
    retry_after: float = 1.0
    server_error: float = 0.0
    connection_reset: float = 0.0
    timeout: float = 0.0
    timeout_after: float = 30.0
    stream_cut: float = 0.0
    cut_after: int = 3
    bad_tool_json: float = 0.0
    empty_answer: float = 0.0
    latency: float = 0.0
    latency_rate: float = 1.0
    latency_tail: str = "fixed"

    @property
    def inert(self) -> bool:
        """No call of the role is ever faulted nor delayed."""
        return not any(getattr(self, kind) for kind in FAULT_KINDS) and not (self.latency and self.latency_rate)


_RATE_KEYS = (*FAULT_KINDS, "latency_rate")
_KEYS = {f.name: f.type for f in fields(FaultRates)}


@dataclass(frozen=True)
class FaultProfile:
    """A named profile: the rates of each role (``default`` for roles it does not name)."""

    name: str
    default: FaultRates = field(default_factory=FaultRates)
    roles: Mapping[str, FaultRates] = field(default_factory=dict)

    def rates(self, role: str) -> FaultRates:
        return self.roles.get(role, self.default)

    @property
    def inert(self) -> bool:
        return self.default.inert and all(r.inert for r in self.roles.values())


@dataclass(frozen=True)
class Fault:
    """What happens to one call: a failure ``kind`` (or ``""``: none) and ``latency_s`` added before it.

    ``status`` and ``retry_after`` are the HTTP answer of a ``rate_limit`` / ``server_error``; ``cut_after`` the
    events a ``stream_cut`` lets through; ``hang_s`` how long a ``timeout`` waits before dropping the
    connection; ``index`` the call's position among its role's calls (from 1)."""

    kind: str = ""
    latency_s: float = 0.0
    status: int | None = None
    retry_after: float | None = None
    cut_after: int | None = None
    hang_s: float | None = None
    index: int = 0

    def __bool__(self) -> bool:
        return bool(self.kind or self.latency_s)

    def record(self) -> dict[str, Any]:
        """What the call's line in ``trajectories.jsonl`` says of it (``fault``)."""
        out: dict[str, Any] = {"kind": self.kind or "latency", "index": self.index}
        for key in ("status", "retry_after", "cut_after", "hang_s"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.latency_s:
            out["latency_s"] = round(self.latency_s, 4)
        return out


def _rates(source: str, table: str, data: Any) -> FaultRates:
    if not isinstance(data, Mapping):
        raise UsageError(f"--faults {source}: [{table}] must be a table of rates (rate_limit = 0.1, ...)")
    values: dict[str, Any] = {}
    for key, raw in data.items():
        if key not in _KEYS:
            raise UsageError(f"--faults {source}: unknown key {table}.{key}; use one of {', '.join(_KEYS)}")
        where = f"--faults {source}: {table}.{key}"
        if key == "latency_tail":
            if raw not in LATENCY_TAILS:
                raise UsageError(f"{where} = {raw!r}: use one of {', '.join(LATENCY_TAILS)}")
            values[key] = raw
            continue
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise UsageError(f"{where} = {raw!r}: must be a number")
        if key in _RATE_KEYS and not 0 <= raw <= 1:
            raise UsageError(f"{where} = {raw!r}: a rate is a share of the calls, from 0 to 1")
        if raw < 0:
            raise UsageError(f"{where} = {raw!r}: must be 0 or more")
        values[key] = int(raw) if key == "cut_after" else float(raw)
    rates = FaultRates(**values)
    total = sum(getattr(rates, kind) for kind in FAULT_KINDS)
    if total > 1 + 1e-9:
        raise UsageError(f"--faults {source}: [{table}] rates add up to {total:g}; a call gets at most one fault, "
                         "so they must add up to 1 or less")
    return rates


def profile_from(name: str, data: Mapping[str, Any], source: str | None = None) -> FaultProfile:
    """A profile from its TOML tables (``[default]`` and one per role); a :class:`UsageError` naming the key."""
    source = source or name
    default = _rates(source, "default", data.get("default", {}))
    roles: dict[str, FaultRates] = {}
    for table, value in data.items():
        if table == "default":
            continue
        if not isinstance(value, Mapping):
            raise UsageError(f"--faults {source}: {table} = {value!r} is not a table; give rates under "
                             f"[default] or a role's table ([agent], [user], [judge])")
        roles[table] = _rates(source, table, {**_non_default(data.get("default", {})), **value})
    return FaultProfile(name, default, roles)


def _non_default(data: Any) -> dict[str, Any]:
    return dict(data) if isinstance(data, Mapping) else {}


#: The built-in profiles, by name.
BUILTIN_PROFILES: Mapping[str, Mapping[str, Any]] = {
    "flaky-api": {"default": {"rate_limit": 0.1, "retry_after": 1, "server_error": 0.05,
                              "connection_reset": 0.02}},
    "slow-api": {"default": {"latency": 0.5, "latency_tail": "pareto", "latency_rate": 1.0, "timeout": 0.02,
                             "timeout_after": 60}},
    "cut-streams": {"default": {"stream_cut": 0.2, "cut_after": 3}},
    "bad-tool-json": {"default": {"bad_tool_json": 0.2, "empty_answer": 0.05}},
    "none": {},
}


def load_profile(spec: str) -> FaultProfile:
    """``--faults SPEC``: a built-in name or a TOML file; a :class:`UsageError` naming what is wrong."""
    if spec in BUILTIN_PROFILES:
        return profile_from(spec, BUILTIN_PROFILES[spec])
    path = Path(spec).expanduser()
    if not path.is_file():
        raise UsageError(f"--faults {spec}: no such file and not a built-in profile; use a TOML file or one of "
                         f"{', '.join(BUILTIN_PROFILES)}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"--faults {spec}: not a readable TOML file ({exc})") from None
    return profile_from(path.stem, data, spec)


def _draws(seed: int | None, task_id: str, trial: int, role: str, index: int) -> tuple[float, float, float]:
    """Three uniform draws in [0, 1) from the call's position (a hash: no generator to seed, a few
    microseconds)."""
    digest = hashlib.blake2b(f"{seed}|{task_id}|{trial}|{role}|{index}".encode(), digest_size=24).digest()
    return tuple(int.from_bytes(digest[i:i + 8], "big") / 2.0 ** 64 for i in (0, 8, 16))  # type: ignore[return-value]


def fault_for(rates: FaultRates, seed: int | None, task_id: str, trial: int, role: str, index: int) -> Fault:
    """The fault of ``role``'s ``index``-th call (from 1) of the attempt at (``task_id``, ``trial``): a pure
    function of its arguments."""
    if rates.inert:
        return Fault(index=index)
    u, lu, tail = _draws(seed, task_id, trial, role, index)
    latency = 0.0
    if rates.latency and lu < rates.latency_rate:
        latency = rates.latency
        if rates.latency_tail == "pareto":
            latency *= min(PARETO_CAP, (1.0 - tail) ** (-1.0 / PARETO_ALPHA))
    edge = 0.0
    for kind in FAULT_KINDS:
        edge += getattr(rates, kind)
        if u < edge:
            return _fault(kind, rates, latency, index, tail)
    return Fault(latency_s=latency, index=index)


def _fault(kind: str, rates: FaultRates, latency: float, index: int, tail: float) -> Fault:
    if kind == "rate_limit":
        return Fault(kind, latency, status=429, retry_after=rates.retry_after, index=index)
    if kind == "server_error":
        return Fault(kind, latency, status=500 if tail < 0.5 else 503, index=index)
    if kind == "timeout":
        return Fault(kind, latency, hang_s=rates.timeout_after, index=index)
    if kind == "stream_cut":
        return Fault(kind, latency, cut_after=rates.cut_after, index=index)
    return Fault(kind, latency, index=index)
