"""The writer of a run's structured logs: structlog JSON lines in the run directory's ``logs.jsonl``, secrets masked.

No global structlog configuration is touched: each run gets its own bound logger, so library users and
tests can run several runs in one process. Plugin code logs through :func:`agentcompass.runtime.logs.get_logger`,
which the runner points at the logger made here.
"""

from __future__ import annotations

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


def make_run_logger(stream: IO[str], redactor: Redactor, **context: Any) -> Any:
    """A structlog logger writing one JSON object per line to ``stream``."""
    return structlog.wrap_logger(
        BufferedLineLogger(stream),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redactor.structlog_processor,
            structlog.processors.JSONRenderer(default=str),
        ],
        context_class=dict,
    ).bind(**context)
