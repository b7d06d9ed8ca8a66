"""Structured logs of a run: structlog JSON lines in the run directory, secrets masked.

No global structlog configuration is touched: each run gets its own bound logger, so library users and
tests can run several runs in one process.
"""

from __future__ import annotations

from typing import IO, Any

import structlog

from agentcompass.redaction import Redactor


def make_run_logger(stream: IO[str], redactor: Redactor, **context: Any) -> Any:
    """A structlog logger writing one JSON object per line to ``stream``."""
    return structlog.wrap_logger(
        structlog.WriteLogger(stream),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redactor.structlog_processor,
            structlog.processors.JSONRenderer(default=str),
        ],
        context_class=dict,
    ).bind(**context)
