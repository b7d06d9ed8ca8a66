"""The writer of a run's structured logs: structlog JSON lines in the run directory's ``logs.jsonl``, secrets masked.

No global structlog configuration is touched: each run gets its own bound logger, so library users and
tests can run several runs in one process. Plugin code logs through :func:`agentcompass.runtime.logs.get_logger`,
which the runner points at the logger made here.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import IO, Any

import structlog

from agentcompass.redaction import Redactor


class BufferedLineLogger:
    """A structlog logger that writes lines without flushing each one; the run directory flushes its files
    at least once a second and when the run ends (results, unlike logs, are flushed line by line)."""

    def __init__(self, stream: IO[str]) -> None:
        self._write = stream.write

    def msg(self, message: str) -> None:
        self._write(message + "\n")

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


#: Log method names ``structlog.processors.add_log_level`` writes as another level.
_LEVEL_NAMES = {"warn": "warning", "exception": "error"}
#: One encoder for every line (``json.dumps`` with an option builds one per call).
_ENCODER = json.JSONEncoder(default=str)


def make_run_logger(stream: IO[str], redactor: Redactor, **context: Any) -> Any:
    """A structlog logger writing one JSON object per line to ``stream``.

    Each line is what ``add_log_level``, ``TimeStamper(fmt="iso", utc=True)``, the redactor's processor and
    ``JSONRenderer(default=str)`` make of the event, in that order, done by one processor (a run logs several
    events per task: four processor calls and an encoder built per line were a measurable share of a run)."""
    mask = redactor.structlog_processor

    def render(logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> str:
        event_dict["level"] = _LEVEL_NAMES.get(method, method)
        event_dict["timestamp"] = datetime.now(tz=UTC).isoformat().replace("+00:00", "Z")
        return _ENCODER.encode(mask(logger, method, event_dict))

    return structlog.wrap_logger(BufferedLineLogger(stream), processors=[render], context_class=dict).bind(**context)
