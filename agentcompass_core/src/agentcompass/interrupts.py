"""Ctrl-C and SIGTERM during a run: the first signal stops the run, later ones never cut its cleanup short.

The first signal cancels the run's main task: scheduling stops, attempts in flight are cancelled and close
their environments, finished results are kept. Every later signal is only reported (``on_signal``), so a
second Ctrl-C cannot leave containers or a half-written summary behind.

One Ctrl-C can arrive twice: under ``uv run`` (or any wrapper that forwards signals) the terminal sends SIGINT
to the whole process group and the wrapper forwards its own copy a moment later. A signal of the same kind
within :data:`ECHO_WINDOW_S` of the previous one is that echo: ignored, neither counted nor reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from types import TracebackType

import attrs

SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Seconds within which a second signal of the same kind is the first one forwarded again (``uv run``), not a
#: second Ctrl-C: far below how fast a person presses Ctrl-C twice on purpose.
ECHO_WINDOW_S = 0.4


@attrs.define
class SignalEchoes:
    """Tells a signal forwarded again by a wrapper (``uv run``) from a new one: the same kind of signal within
    :data:`ECHO_WINDOW_S` of the last one that counted."""

    _last: dict[signal.Signals, float] = attrs.field(factory=dict)

    def is_echo(self, sig: signal.Signals) -> bool:
        now, last = time.monotonic(), self._last.get(sig)
        if last is not None and now - last < ECHO_WINDOW_S:
            return True
        self._last[sig] = now
        return False


@attrs.define
class Interrupts:
    """Installs the run's signal handlers on the running loop for the duration of a ``with`` block."""

    enabled: bool = True
    #: Called with the signal's name and how many signals have arrived (1 for the first).
    on_signal: Callable[[str, int], None] | None = None
    count: int = 0
    #: The run was drained (``agentcompass ctl drain``): it ends as an interrupted run, no signal needed.
    drained: bool = False
    _target: asyncio.Task[object] | None = None
    _installed: list[signal.Signals] = attrs.field(factory=list)
    _echoes: SignalEchoes = attrs.field(factory=lambda: SignalEchoes())

    def __enter__(self) -> Interrupts:
        if not self.enabled:
            return self
        loop = asyncio.get_running_loop()
        self._target = asyncio.current_task()
        for sig in SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._received, sig)
                self._installed.append(sig)
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        if self.count:
            # Interrupted: keep reporting (never raising) further signals until the loop closes, which removes
            # the handlers; the caller then decides (the CLI ignores them while it exits).
            self._target = None
            return
        loop = asyncio.get_running_loop()
        for sig in self._installed:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        self._installed.clear()

    def shield_cleanup(self) -> None:
        """From now on signals no longer cancel anything: the run is closing down."""
        self._target = None

    @property
    def interrupted(self) -> bool:
        return self.count > 0 or self.drained

    def _received(self, sig: signal.Signals) -> None:
        if self._echoes.is_echo(sig):
            return
        self.count += 1
        if self.count == 1 and self._target is not None:
            self._target.cancel()
        if self.on_signal is not None:
            self.on_signal(sig.name, self.count)
