"""The canonical key of a model request: what replay matches a call on and what the call cache is keyed on.

A request is its canonical messages, tools and generation settings (:mod:`agentcompass.protocols`). Its key is
the SHA-256 of that triple after :func:`normalise` took out what differs between two attempts of the same work
although the model sees the same thing:

* temporary paths — a component under the temp directory (``/tmp``, ``$TMPDIR``) named the way ``mkdtemp``
  names them (``<prefix>-XXXXXXXX`` or ``tmpXXXXXXXX``), as the ``local`` environment's working directories
  (``/tmp/agentcompass-local-RUN-abcd1234/roman-x1y2z3w4/solution.py`` becomes ``<tmp>/solution.py``);
* the gateway's per-attempt tokens (``acgw-...``) and its loopback address's port;
* today's date in ISO form (``2026-12-02``; the day before and after too), which agents such as Claude Code
  put in their system prompt — so a run recorded one day replays another (a date that is part of the task and
  happens to be the day of recording or replay is taken for today's, a rare false match);
* tool-call ids (numbered in order of appearance instead: the model chose them, the agent only echoes them);
* settings that identify a session rather than ask for a different answer (:data:`IGNORED_PARAMS`).

The model's name is not part of the key (the cache adds it to its own key). :func:`first_difference` says where
two requests first differ, for the error a replay miss raises.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

#: Generation settings left out of the key: they name a session or a delivery, not a different question.
IGNORED_PARAMS = frozenset({"metadata", "user", "stream", "stream_options", "store", "service_tier",
                            "prompt_cache_key", "safety_identifier"})


def _temp_roots() -> list[str]:
    roots = {"/tmp", "/var/tmp", tempfile.gettempdir(), os.path.realpath(tempfile.gettempdir())}
    return sorted((r.rstrip("/") for r in roots if r and r != "/"), key=len, reverse=True)


_COMPONENT = r"/(?:[^/\s'\"`<>]*[-_.]|tmp)[a-z0-9_]{8}(?=[/\s'\"`<>:;,.)\]}]|$)"
_TEMP_ROOTS = tuple(_temp_roots())
_TEMP_PATH = re.compile("(?:" + "|".join(re.escape(r) for r in _TEMP_ROOTS) + f")(?:{_COMPONENT})+")
_TOKEN = re.compile(r"acgw-[A-Za-z0-9_-]{20,}")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_LOOPBACK = re.compile(r"\b(127\.0\.0\.1|localhost|host\.docker\.internal|\[::1\]):\d{2,5}\b")


def current_dates() -> frozenset[str]:
    """Today's date (ISO ``YYYY-MM-DD``), the day before and the day after (time zones: an agent in a container
    may use UTC or local time)."""
    day = int(time.time() // 86400)  # the UTC day: the three dates are made once a day, not once a call
    if _dates_of[0] != day:
        now = datetime.now(UTC)
        _dates_of[:] = [int(now.timestamp() // 86400),
                        frozenset((now + timedelta(days=d)).date().isoformat() for d in (-1, 0, 1))]
    return _dates_of[1]


#: The UTC day :func:`current_dates` last made its dates for, and those dates.
_dates_of: list[Any] = [None, frozenset()]


def normalise_text(text: str, dates: frozenset[str] = frozenset()) -> str:
    """``text`` with temporary paths, gateway tokens, loopback ports and ``dates`` (today's, from
    :func:`current_dates`) replaced by placeholders."""
    # Each pattern is tried only where what it must match is there (a date of ``dates``, a temp root): most
    # strings of a request hold neither, and a substring test costs a fraction of a pattern's scan.
    if dates and "-" in text and any(d in text for d in dates):
        text = _DATE.sub(lambda m: "<today>" if m.group(0) in dates else m.group(0), text)
    if "/" in text and any(root in text for root in _TEMP_ROOTS):
        text = _TEMP_PATH.sub("<tmp>", text)
    if "acgw-" in text:
        text = _TOKEN.sub("<token>", text)
    if ":" in text:
        text = _LOOPBACK.sub(r"\1:<port>", text)
    return text


def _strings(value: Any, dates: frozenset[str] = frozenset()) -> Any:
    kind = type(value)  # the JSON types first, by exact type: an ABC's isinstance costs several times more
    if kind is str:
        return normalise_text(value, dates)
    if kind is dict:
        return {str(k): _strings(v, dates) for k, v in value.items()}
    if kind is list:
        return [_strings(v, dates) for v in value]
    if kind is int or kind is float or kind is bool or value is None:
        return value
    if isinstance(value, str):
        return normalise_text(value, dates)
    if isinstance(value, Mapping):
        return {str(k): _strings(v, dates) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strings(v, dates) for v in value]
    return value


def _renumber_ids(messages: list[Any]) -> list[Any]:
    """Tool-call ids replaced by ``call#N`` in order of appearance (assistant calls and tool results alike)."""
    numbers: dict[str, str] = {}

    def number(value: Any) -> Any:
        if not isinstance(value, str) or not value:
            return value
        return numbers.setdefault(value, f"call#{len(numbers) + 1}")

    out = []
    for message in messages:
        if not isinstance(message, dict):
            out.append(message)
            continue
        message = dict(message)
        if isinstance(message.get("tool_calls"), list):
            message["tool_calls"] = [{**c, "id": number(c.get("id"))} if isinstance(c, dict) else c
                                     for c in message["tool_calls"]]
        if "tool_call_id" in message:
            message["tool_call_id"] = number(message["tool_call_id"])
        out.append(message)
    return out


def normalise(messages: Sequence[Any], tools: Sequence[Any] | None, params: Mapping[str, Any] | None
              ) -> dict[str, Any]:
    """The parts of a request its key is made of (see the module's docstring)."""
    dates = current_dates()
    return {
        "messages": _renumber_ids(_strings(list(messages), dates)),
        "tools": _strings(list(tools or ())),
        "params": _strings({k: v for k, v in (params or {}).items() if k not in IGNORED_PARAMS and v is not None}),
    }


#: The canonical JSON of a key's parts (one encoder for every call: ``json.dumps`` with options makes one each time).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _digest(value: Any) -> str:
    return hashlib.sha256(_CANONICAL.encode(value).encode()).hexdigest()


def request_key(messages: Sequence[Any], tools: Sequence[Any] | None = None,
                params: Mapping[str, Any] | None = None) -> str:
    """The request's canonical key: 64 hex digits."""
    return _digest(normalise(messages, tools, params))


def tool_digests(tools: Sequence[Any] | None) -> list[str]:
    """A short digest of each tool's normalised schema (so a miss can name the tool whose schema changed)."""
    return [_digest(_strings(t))[:12] for t in tools or ()]


def recorded_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings a trajectory records of a call (those its key holds)."""
    return {k: v for k, v in (params or {}).items() if k not in IGNORED_PARAMS and v is not None}


# -- where two requests differ ----------------------------------------------------------------------------------


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _text_diff(old: str, new: str, lines: int = 8) -> str:
    if "\n" not in old and "\n" not in new:
        at = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
        start = max(0, at - 60)
        return (f"    recorded: {'...' if start else ''}{old[start:at + 100]!r}\n"
                f"    now:      {'...' if start else ''}{new[start:at + 100]!r}")
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "recorded", "now", n=1, lineterm=""))
    kept = [f"    {line[:200]}" for line in diff[2:2 + lines]]
    if len(diff) > 2 + lines:
        kept.append(f"    ... ({len(diff) - 2 - lines} more diff lines)")
    return "\n".join(kept)


def _walk(path: str, old: Any, new: Any) -> tuple[str, Any, Any] | None:
    if type(old) is not type(new) and not (isinstance(old, int | float) and isinstance(new, int | float)):
        return path, old, new
    if isinstance(old, Mapping):
        for key in sorted(set(old) | set(new), key=str):
            if key not in old or key not in new:
                return f"{path}.{key}", old.get(key, "<absent>"), new.get(key, "<absent>")
            found = _walk(f"{path}.{key}", old[key], new[key])
            if found:
                return found
        return None
    if isinstance(old, list):
        for i, (a, b) in enumerate(zip(old, new, strict=False)):
            found = _walk(f"{path}[{i}]", a, b)
            if found:
                return found
        if len(old) != len(new):
            return f"{path} (length)", f"{len(old)} items", f"{len(new)} items"
        return None
    return None if old == new else (path, old, new)


def first_difference(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """Where the normalised requests ``recorded`` and ``now`` (``{"messages", "params", "tools"}``, where
    ``tools`` may be names with digests) first differ, as a few lines: the path, then a short diff."""
    found = _walk("", dict(recorded), dict(now))
    if found is None:
        return "the requests differ in something the trajectory does not keep (a cut message, a masked secret)"
    path, old, new = found
    path = path.lstrip(".")
    if isinstance(old, str) and isinstance(new, str):
        return f"{path} differs:\n{_text_diff(old, new)}"
    return f"{path} differs:\n    recorded: {_short(old)}\n    now:      {_short(new)}"
