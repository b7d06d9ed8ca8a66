"""Signs of life of a task attempt, for the run's watchdog (``--stall-timeout``).

An attempt shows it is alive when it changes phase, when one of its model calls ends, and when code of its
environment makes output. The runner sees the first two itself; an environment session tells it of the third
with :func:`sign_of_life`, called wherever it receives output of an ``exec`` (and when an ``exec`` starts)::

    from agentcompass.runtime.liveness import sign_of_life

    def on_output(chunk: bytes) -> None:
        sign_of_life("exec output")
        ...

The call is cheap and safe anywhere: outside an attempt the runner watches it does nothing. The attempt is the
one whose asyncio task (or a task or thread it started, which inherit its context) makes the call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["listening", "sign_of_life"]

_listener: ContextVar[Callable[[str], None] | None] = ContextVar("agentcompass_liveness", default=None)


def sign_of_life(what: str) -> None:
    """Tell the watchdog of the attempt running here that it is alive; ``what`` says what it did (``exec
    output``, ``exec bash -lc ...``): the watchdog names the last one when it gives up on a stalled attempt."""
    listener = _listener.get()
    if listener is not None:
        listener(what)


@contextlib.contextmanager
def listening(listener: Callable[[str], None]) -> Iterator[None]:
    """The runner's side: :func:`sign_of_life` calls in this context (and in tasks started from it) reach
    ``listener``."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
