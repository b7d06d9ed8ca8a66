"""Riding out a provider's rate limits: the concurrency of calls to one provider endpoint, adapted to its answers.

:class:`AdaptiveLimit` stands in front of a provider's connection pool (the ``agentcompass-models`` providers
use one per endpoint, ``--max-connections`` its ceiling). It lets at most ``limit`` calls be in flight and
adapts ``limit`` as TCP does its window:

* **additive increase** — each answered call adds ``1 / limit`` (about one more call in flight per round of
  calls), up to the ceiling;
* **multiplicative decrease** — a rate-limited answer (HTTP 429 or 503) cuts it to :data:`DECREASE` of the calls
  in flight, at most once per round (the other answers of the same round, sent before the cut, do not cut
  it again), never below 1;
* **Retry-After** — a rate-limited answer's ``Retry-After`` holds every new call to the provider until then
  (at most :data:`PAUSE_CAP` seconds).

Calls over the limit wait in line (first come, first served). Each change of the limit is logged
(``rate_limit.decreased`` / ``rate_limit.increased``: ``provider``, ``limit``, ``in_flight``, ``waiting``), so
a run's ``logs.jsonl`` shows where it settled; :func:`throttled` is what the run's status line shows (the
providers whose limit is below their ceiling, and how many calls wait).
"""

from __future__ import annotations

import asyncio
import collections
import time
import weakref
from dataclasses import dataclass

from agentcompass.runtime.logs import get_logger

#: The limit after a rate-limited answer, as a share of the calls in flight then.
DECREASE = 0.7
#: A Retry-After holds new calls at most this many seconds.
PAUSE_CAP = 60.0
#: Statuses that say "too many calls" (a 503 is what some providers answer when overloaded).
RATE_LIMITED = frozenset({429, 503, 529})


@dataclass(frozen=True)
class LimitState:
    """One provider's limit now (what the status line shows)."""

    provider: str
    limit: int
    ceiling: int
    in_flight: int
    waiting: int
    #: Seconds left of a Retry-After hold (0 when none).
    paused_s: float


_LIMITS: weakref.WeakSet[AdaptiveLimit] = weakref.WeakSet()


def throttled() -> list[LimitState]:
    """The providers of this process whose limit is below its ceiling, or who have calls waiting."""
    states = [limit.state() for limit in list(_LIMITS)]
    return sorted((s for s in states if s.limit < s.ceiling or s.waiting or s.paused_s), key=lambda s: s.provider)


class AdaptiveLimit:
    """At most ``limit`` calls in flight to one provider, adapted to its answers (see the module).

    ``async with limit.slot() as ticket`` holds a place; then tell it how the call went: :meth:`answered`, or
    :meth:`rate_limited` with the round's ``ticket`` and the answer's Retry-After."""

    def __init__(self, provider: str, ceiling: int) -> None:
        self.provider = provider
        self.ceiling = max(1, ceiling)
        self.limit = float(self.ceiling)
        self.in_flight = 0
        #: Rounds: a decrease starts a new one; an answer to a call sent in an older round does not cut again.
        self.round = 0
        self.paused_until = 0.0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._log = get_logger(component="rate_limit")
        _LIMITS.add(self)

    def state(self) -> LimitState:
        return LimitState(self.provider, int(self.limit), self.ceiling, self.in_flight, len(self._waiters),
                          max(0.0, self.paused_until - time.monotonic()))

    async def acquire(self) -> int:
        """Wait for a place; the round it was granted in."""
        if self._waiters or not self._free():
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            self._wake()
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self.release()  # granted as it was cancelled: give the place on
                else:
                    self._waiters.remove(waiter)
                raise
        else:
            self.in_flight += 1
        return self.round

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def slot(self) -> _Slot:
        return _Slot(self)

    def answered(self) -> None:
        """A call was answered (not rate-limited): additive increase."""
        if self.limit >= self.ceiling:
            return
        before = int(self.limit)
        self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
        if int(self.limit) > before:
            self._log.info("rate_limit.increased", provider=self.provider, limit=int(self.limit),
                           in_flight=self.in_flight, waiting=len(self._waiters))
            self._wake()

    def rate_limited(self, ticket: int, status: int, retry_after: float | None = None) -> None:
        """A call sent in round ``ticket`` was rate-limited (``status``): multiplicative decrease (once per
        round), and a hold of new calls for ``retry_after`` seconds."""
        if retry_after:
            self.paused_until = max(self.paused_until, time.monotonic() + min(retry_after, PAUSE_CAP))
        if ticket != self.round:
            return
        self.round += 1
        before = int(self.limit)
        self.limit = max(1.0, min(self.limit, float(max(self.in_flight, 1))) * DECREASE)
        self._log.info("rate_limit.decreased", provider=self.provider, limit=int(self.limit), previous=before,
                       status=status, retry_after_s=retry_after, in_flight=self.in_flight,
                       waiting=len(self._waiters))

    def _free(self) -> bool:
        return self.in_flight < int(self.limit) and time.monotonic() >= self.paused_until

    def _wake(self) -> None:
        while self._waiters and self._free():
            waiter = self._waiters.popleft()
            if waiter.done():
                continue
            self.in_flight += 1
            waiter.set_result(None)
        if self._waiters and self.paused_until > time.monotonic() and self._timer is None:
            loop = asyncio.get_running_loop()

            def resume() -> None:
                self._timer = None
                self._wake()

            self._timer = loop.call_later(self.paused_until - time.monotonic(), resume)


class _Slot:
    def __init__(self, limit: AdaptiveLimit) -> None:
        self.limit = limit

    async def __aenter__(self) -> int:
        return await self.limit.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.limit.release()
