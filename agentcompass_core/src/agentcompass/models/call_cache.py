"""``run --cache DIR``: a content-addressed cache of model answers, shared by every run that names ``DIR``.

An entry's key is the SHA-256 of the model (``PROVIDER/NAME``) and the request's canonical key
(:mod:`agentcompass.models.call_key`: messages, tools and settings — the (task, trial)'s ``seed`` among them
when the model takes one). It lives in ``DIR/<2 hex>/<key>.json`` holding the answer (message, usage, finish
reason), the model and when it was stored. Only answers are stored, never errors.

A run without ``--seed`` draws a random one, so a model that takes a seed (the ``mock`` among them) is asked
with another seed than the run that filled the cache, and every call misses. To say so, a stored answer whose
request had a seed also notes that seed under the key of the same request without it
(``DIR/seeds/<2 hex>/<key>``); a miss whose request differs from a stored one only by its seed is counted, and
the run ends with one warning line (``agentcompass_run_warning``; ``cache.seed_miss`` in ``logs.jsonl`` at the
first).

Safe for concurrent runs and kills: an entry is written to a temporary file in its directory and renamed into
place (``os.replace``, atomic on one file system), so a reader sees a whole entry or none, and a killed writer
leaves at most a ``.tmp`` file no reader looks at. Two runs storing one key race harmlessly (the last rename
wins; both hold the same kind of answer). No lock is taken. An entry older than ``expiry_s`` is a miss (and is
replaced when the call is stored again); an unreadable one is a miss too.

Hits are recorded with ``"source": "cache"``, cost nothing (``cost_usd`` 0, ``saved_cost_usd`` what they would
have cost) and are counted per role in ``summary.json``'s usage (``cache_hits``, ``cache_saved_tokens``,
``cache_saved_usd``). The seam: :class:`CacheSource` is a :class:`~agentcompass.models.access.CallSource`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentcompass.errors import UsageError
from agentcompass.models.call_key import request_key
from agentcompass.models.metering import TaskMeter
from agentcompass.models.stored_answers import (
    count_tokens_reply,
    is_count,
    native_reply,
    parse_native,
    response_from,
    response_json,
    watch_reply,
)
from agentcompass.protocols import ProtocolError
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.model_stream import NativeReply, NativeRequest, StreamEnd, StreamEvent, events_of
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError

#: Entry format version, part of every key: a new format never reads an old entry.
FORMAT = 1
#: The generation setting a run's seed reaches a model by.
SEED_PARAM = "seed"
#: Where the seeds of stored requests are noted, by the key of the request without its seed.
SEEDS_DIR = "seeds"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_expiry(text: str | None) -> float | None:
    """``--cache-expiry``: seconds, or a number with a unit (``30m``, ``12h``, ``7d``, ``2w``)."""
    if text is None or str(text).strip() == "":
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(text))
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"--cache-expiry {text!r}: give a positive number of seconds or a number with a unit "
                         "(30m, 12h, 7d, 2w)")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


@attrs.define
class CallCache:
    """The cache directory."""

    root: Path
    expiry_s: float | None = None

    @classmethod
    def open(cls, root: Path, expiry_s: float | None = None) -> CallCache:
        try:
            root.mkdir(parents=True, exist_ok=True)
            probe = root / f".probe-{os.getpid()}-{secrets.token_hex(4)}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise UsageError(f"--cache {root}: cannot write there ({exc.strerror or exc})") from None
        return cls(root.resolve(), expiry_s)

    @staticmethod
    def key(model: str, canonical_key: str) -> str:
        return hashlib.sha256(f"{FORMAT}\n{model}\n{canonical_key}".encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry of ``key``, or ``None`` (absent, expired or unreadable)."""
        try:
            entry = json.loads(self.path(key).read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("response"), dict):
            return None
        if self.expiry_s is not None and time.time() - float(entry.get("stored_at") or 0) > self.expiry_s:
            return None
        return entry

    def put(self, key: str, model: str, response: ChatResponse) -> None:
        """Store an answer under ``key`` (temporary file, then an atomic rename)."""
        entry = {"key": key, "format": FORMAT, "model": model, "stored_at": time.time(),
                 "response": response_json(response)}
        _write(self.path(key), json.dumps(entry, ensure_ascii=False).encode())

    def seed_path(self, seedless_key: str) -> Path:
        return self.root / SEEDS_DIR / seedless_key[:2] / seedless_key

    def note_seed(self, seedless_key: str, seed: object) -> None:
        """Note that a request stored with ``seed`` has ``seedless_key`` without it."""
        _write(self.seed_path(seedless_key), json.dumps(seed).encode())

    def stored_seed(self, seedless_key: str) -> object | None:
        """The seed of a stored request whose key without its seed is ``seedless_key`` (``None``: none)."""
        try:
            return json.loads(self.seed_path(seedless_key).read_bytes())
        except (OSError, ValueError):
            return None


def _write(target: Path, data: bytes) -> None:
    """``data`` into ``target``: a temporary file in its directory, then an atomic rename (failures ignored)."""
    temporary = target.parent / f".{target.name[:16]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(data)
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()


@attrs.define
class SeedMisses:
    """The run's misses whose request differs from a stored one only by its seed."""

    cache_dir: str
    count: int = 0

    def note(self, model: str) -> None:
        self.count += 1
        if self.count == 1:
            get_logger(component="cache").warning("cache.seed_miss", cache=self.cache_dir, model=model)

    def warning(self) -> str | None:
        if not self.count:
            return None
        calls = "call" if self.count == 1 else "calls"
        return (f"--cache {self.cache_dir}: {self.count} model {calls} missed only because the request's seed "
                "differs from the cached one's (without --seed a run draws a random seed, and a model that takes "
                "a seed, such as mock, is sent it): run with the --seed of the run that filled the cache")


@attrs.define
class CacheSource:
    """The :class:`~agentcompass.models.access.CallSource` of ``--cache``."""

    cache: CallCache
    #: Each role's ``PROVIDER/NAME`` (part of the key).
    models: Mapping[str, str]
    seed_misses: SeedMisses = attrs.field(default=attrs.Factory(lambda self: SeedMisses(str(self.cache.root)),
                                                                takes_self=True))

    def decorate(self, clients: Mapping[str, ModelClient], meter: TaskMeter) -> dict[str, ModelClient]:
        return {role: CachingClient(client, self.cache, self.models.get(role, client.model), self.seed_misses)
                for role, client in clients.items()}

    def provenance(self) -> dict[str, object]:
        return {"cache": {"dir": str(self.cache.root), "expiry_s": self.cache.expiry_s}}

    def warnings(self) -> list[str]:
        warning = self.seed_misses.warning()
        return [warning] if warning else []


class CachingClient(ModelClient):
    """A client answering from the cache when it can, storing what the live client answers."""

    def __init__(self, live: ModelClient, cache: CallCache, model_spec: str,
                 seed_misses: SeedMisses | None = None) -> None:
        self.live = live
        self.cache = cache
        self.model_spec = model_spec
        self.seed_misses = seed_misses if seed_misses is not None else SeedMisses(str(cache.root))
        self.model = live.model
        self.secrets = tuple(getattr(live, "secrets", ()))
        self.accepts_seed = live.accepts_seed
        self.native_protocols = live.native_protocols

    def _key(self, messages: Sequence[Any], tools: Sequence[Any] | None, params: Mapping[str, Any]) -> str:
        return self.cache.key(self.model_spec, request_key(messages, tools, params))

    def _seedless(self, messages: Sequence[Any], tools: Sequence[Any] | None, params: Mapping[str, Any]
                  ) -> tuple[str, object] | None:
        """The key of the request without its seed, and the seed (``None``: the request has no seed)."""
        seed = params.get(SEED_PARAM)
        if seed is None:
            return None
        rest = {k: v for k, v in params.items() if k != SEED_PARAM}
        return self.cache.key(self.model_spec, request_key(messages, tools, rest)), seed

    def _hit(self, key: str, seedless: tuple[str, object] | None = None) -> ChatResponse | None:
        entry = self.cache.get(key)
        if entry is not None:
            return response_from(entry["response"], "cache")
        if seedless is not None and self.cache.stored_seed(seedless[0]) not in (None, seedless[1]):
            self.seed_misses.note(self.model_spec)
        return None

    def _put(self, key: str, seedless: tuple[str, object] | None, response: ChatResponse) -> None:
        self.cache.put(key, self.model_spec, response)
        if seedless is not None:
            self.cache.note_seed(*seedless)

    async def chat(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                   **params: Any) -> ChatResponse:
        key, seedless = self._key(messages, tools, params), self._seedless(messages, tools, params)
        hit = self._hit(key, seedless)
        if hit is not None:
            return hit
        response = await self.live.chat(messages, tools=tools, **params)
        self._put(key, seedless, response)
        return response

    async def stream(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                     **params: Any) -> AsyncGenerator[StreamEvent, None]:
        key, seedless = self._key(messages, tools, params), self._seedless(messages, tools, params)
        hit = self._hit(key, seedless)
        if hit is not None:
            for event in events_of(hit):
                yield event
            return
        async for event in self.live.stream(messages, tools=tools, **params):
            if isinstance(event, StreamEnd):
                self._put(key, seedless, event.response)
            yield event

    async def native(self, request: NativeRequest) -> NativeReply:
        if is_count(request):  # not a model call (nothing metered): the provider's count, else an estimate
            if request.protocol in self.live.native_protocols:
                with contextlib.suppress(ModelError):
                    return await self.live.native(request)
            return count_tokens_reply(request)
        try:
            canonical = parse_native(request)
        except (KeyError, ProtocolError):
            return await self.live.native(request)
        key = self._key(canonical.messages, canonical.tools, canonical.params)
        seedless = self._seedless(canonical.messages, canonical.tools, canonical.params)
        hit = self._hit(key, seedless)
        if hit is not None:
            return native_reply(hit, request, self.model, "cache")
        reply = await self.live.native(request)
        return watch_reply(reply, request, self.model, lambda r: self._put(key, seedless, r))

    async def aclose(self) -> None:
        """Nothing: the live client is the run's, closed when the run ends."""
