"""The warm pool: containers created and started ahead of the tasks that will take them (``prestart=N``).

The pool knows the run's coming demand from ``EnvironmentProvider.plan`` (every attempt's spec, in the order
the queue runs them, each task once per trial): it keeps a container started for each of the next ``size``
predicted opens, and every ``open`` takes one (and the pool starts the next). A container is handed to
exactly one task, never reused; one that no task took is removed at teardown with the rest of the run's.
Starting one is bounded by ``room()`` (``--max-environments``, counting open sessions and pool containers
alike).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Generic, TypeVar

from agentcompass.runtime.types import EnvironmentSpec

T = TypeVar("T")


def pool_key(spec: EnvironmentSpec) -> Hashable:
    """What makes two specs' containers interchangeable: every field (the environment sorted)."""
    return tuple(
        (f.name, tuple(sorted(v.items())) if isinstance(v, Mapping) else v)
        for f in dataclasses.fields(spec)
        for v in [getattr(spec, f.name)]
    )


class WarmPool(Generic[T]):
    """Started containers by spec, ahead of the predicted opens.

    :param start: starts one container for a key (a coroutine; it cleans up after itself when cancelled).
    :param room: whether one more container may exist now (``--max-environments``).
    """

    def __init__(self, start: Callable[[Hashable], Awaitable[T]], room: Callable[[], bool]) -> None:
        self.size = 0
        self._start = start
        self._room = room
        self._predicted: collections.deque[Hashable] = collections.deque()
        self._ready: dict[Hashable, collections.deque[asyncio.Task[T]]] = collections.defaultdict(collections.deque)
        self.closed = False

    @property
    def pending(self) -> int:
        """Containers started or starting that no task has taken yet."""
        return sum(len(q) for q in self._ready.values())

    def predict(self, keys: Iterable[Hashable]) -> None:
        """The coming opens, in order (replaces what was predicted)."""
        self._predicted = collections.deque(keys)

    def take(self, key: Hashable) -> asyncio.Task[T] | None:
        """An open of ``key``: its predicted slot is used, and a pool container of it handed over (a finished
        start first), or None."""
        try:
            self._predicted.remove(key)
        except ValueError:
            pass
        queue = self._ready.get(key)
        if not queue:
            return None
        for task in queue:
            if task.done():
                queue.remove(task)
                return task
        return queue.popleft()

    def wants(self, key: Hashable) -> bool:
        """Whether a predicted open of ``key`` has no container yet (started, starting or given back)."""
        if self.closed:
            return False
        return sum(1 for k in self._predicted if k == key) > len(self._ready.get(key, ()))

    def give(self, key: Hashable, task: asyncio.Task[T]) -> None:
        """A container back from its task (being made ready by ``task``), for the next open of ``key``."""
        self._ready[key].append(task)

    def refill(self) -> None:
        """Start containers for the next ``size`` predicted opens that have none yet."""
        if self.closed or self.size <= 0:
            return
        window = list(self._predicted)[: self.size]
        have = {key: len(queue) for key, queue in self._ready.items()}
        for key in window:
            if have.get(key, 0) > 0:
                have[key] -= 1
                continue
            if not self._room():
                return
            task = asyncio.ensure_future(self._start(key))
            self._ready[key].append(task)

    def close(self) -> list[asyncio.Task[T]]:
        """Stop starting; the containers nobody took (their tasks, to wait for or cancel)."""
        self.closed = True
        left = [task for queue in self._ready.values() for task in queue]
        self._ready.clear()
        return left
