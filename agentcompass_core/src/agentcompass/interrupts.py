"""Ctrl-C and SIGTERM during a run: the first signal stops the run, later ones never cut its cleanup short.

The first signal cancels the run's main task: scheduling stops, attempts in flight are cancelled and close
their environments, finished results are kept. Every later signal is only reported (``on_signal``), so a
second Ctrl-C cannot leave containers or a half-written summary behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from types import TracebackType

import attrs

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@attrs.define
class Interrupts:
    """Installs the run's signal handlers on the running loop for the duration of a ``with`` block."""

    enabled: bool = True
    #: Called with the signal's name and how many signals have arrived (1 for the first).
    on_signal: Callable[[str, int], None] | None = None
    count: int = 0
    _target: asyncio.Task[object] | None = None
    _installed: list[signal.Signals] = attrs.field(factory=list)

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
        return self.count > 0

    def _received(self, sig: signal.Signals) -> None:
        self.count += 1
        if self.count == 1 and self._target is not None:
            self._target.cancel()
        if self.on_signal is not None:
            self.on_signal(sig.name, self.count)
