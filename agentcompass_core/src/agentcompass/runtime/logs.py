"""The run's structured logger, for plugin code.

Inside a run, ``get_logger()`` returns a logger whose events land in the run's ``logs.jsonl`` (structlog JSON,
secrets masked), with the run's context bound. The runner installs it for everything it schedules, background
tasks that plugins start included (a context variable). Outside a run, events go to the standard library's
``logging`` under the logger ``agentcompass``.

::

    from agentcompass.runtime.logs import get_logger

    log = get_logger(plugin="docker")
    log.info("docker.image_built", image=tag, seconds=elapsed)   # stable event names, keyword fields
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

_run_logger: ContextVar[Any] = ContextVar("agentcompass_run_logger", default=None)
_fallback = logging.getLogger("agentcompass")
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class RunLogger:
    """A logger bound to some context; each call goes to the current run's logger, or to ``logging``."""

    __slots__ = ("_context",)

    def __init__(self, context: dict[str, Any]) -> None:
        self._context = context

    def bind(self, **context: Any) -> RunLogger:
        return RunLogger({**self._context, **context})

    def _log(self, level: str, event: str, fields: dict[str, Any]) -> None:
        run_log = _run_logger.get()
        if run_log is not None:
            getattr(run_log, level)(event, **self._context, **fields)
        elif _fallback.isEnabledFor(_LEVELS[level]):
            _fallback.log(_LEVELS[level], "%s %s", event, {**self._context, **fields})

    def debug(self, event: str, **fields: Any) -> None:
        self._log("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._log("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._log("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._log("error", event, fields)


def get_logger(**context: Any) -> RunLogger:
    """A logger for plugin code; ``context`` is bound to every event."""
    return RunLogger(dict(context))


@contextlib.contextmanager
def bound_run_logger(logger: Any) -> Iterator[None]:
    """Make ``logger`` (a structlog logger) the current run's logger within the block. Used by the runner."""
    token = _run_logger.set(logger)
    try:
        yield
    finally:
        _run_logger.reset(token)


#: Levels :func:`forwarded_warnings` sends on.
FORWARDED_LEVELS = ("warning", "error")


class _Forwarding:
    """A run logger that sends warnings and errors on and leaves the rest where it went before (and what is
    logged while sending, as a head in this same process writing what it was sent)."""

    def __init__(self, send: Callable[[str, str, dict[str, Any]], None], before: Any,
                 levels: tuple[str, ...] = FORWARDED_LEVELS) -> None:
        self._send, self._before, self._levels = send, before, levels
        self._sending = False

    def _forward(self, level: str, event: str, fields: dict[str, Any]) -> None:
        if self._sending:
            self._pass(level, event, fields)
            return
        self._sending = True
        try:
            self._send(level, event, fields)
        finally:
            self._sending = False

    def _pass(self, level: str, event: str, fields: dict[str, Any]) -> None:
        if self._before is not None:
            getattr(self._before, level)(event, **fields)
        elif _fallback.isEnabledFor(_LEVELS[level]):
            _fallback.log(_LEVELS[level], "%s %s", event, fields)

    def _log(self, level: str, event: str, fields: dict[str, Any]) -> None:
        if level in self._levels:
            self._forward(level, event, fields)
        else:
            self._pass(level, event, fields)

    def debug(self, event: str, **fields: Any) -> None:
        self._log("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._log("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._log("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._log("error", event, fields)


@contextlib.contextmanager
def forwarded_warnings(send: Callable[[str, str, dict[str, Any]], None], *,
                       levels: tuple[str, ...] = FORWARDED_LEVELS) -> Iterator[None]:
    """Within the block (and the tasks it starts), warning and error events (the events of ``levels``) go to
    ``send(level, event, fields)`` instead of the run's log; the rest go where they went. A remote worker uses
    it to send an attempt's warnings to the head's ``logs.jsonl`` (:mod:`agentcompass.runtime.remote`), and its
    set-up's progress (``levels=("info", "warning", "error")``: images pulled, built, pushed)."""
    token = _run_logger.set(_Forwarding(send, _run_logger.get(), levels))
    try:
        yield
    finally:
        _run_logger.reset(token)
