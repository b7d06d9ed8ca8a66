"""Getting a run's spans to the OTLP collector, or saying in one line that none is there.

The SDK's OTLP exporters retry an unreachable collector with back-off (about 7 s per batch) and log each retry
as a multi-line warning. :class:`GuardedExporter` wraps the exporter: before a batch goes out while the
collector is not known to answer, it opens a TCP connection to the collector (at most :data:`PROBE_TIMEOUT`
seconds); when that fails the batch is dropped at once, so a run with no collector neither waits at its end nor
fills the terminal. The first failure is reported once, as one line on stderr naming the endpoint (and as
``otel.export_failed`` in the run's ``logs.jsonl``); the SDK exporters' own messages are kept off the terminal
(the guard's line says what they would).

Imported only when a run is traced (it needs the OpenTelemetry SDK).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

#: Seconds a batch waits for a TCP connection to a collector not known to answer; past it the batch is dropped.
PROBE_TIMEOUT = 0.5
#: The loggers of the SDK's OTLP exporters (their retries' warnings give way to the guard's one line).
EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.common.http",
)
#: Characters of the SDK's last message a warning quotes.
REASON_CHARS = 200
DEFAULT_PORTS = {"http": 80, "https": 443}


def probe(endpoint: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why no TCP connection to ``endpoint``'s host and port could be made within ``timeout`` s (``None``: one
    could)."""
    parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    try:
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 80)
    except ValueError:
        return f"no port in {endpoint!r}"
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except ConnectionRefusedError:
        return "connection refused"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


class _LastMessage(logging.Filter):
    """Keeps the SDK exporters' messages off the terminal, remembering the last one (a failure's reason)."""

    def __init__(self) -> None:
        super().__init__()
        self.message: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            self.message = record.getMessage()
        return False


_quieted: _LastMessage | None = None
_quiet_lock = threading.Lock()


def quiet_sdk_exporters() -> _LastMessage:
    """Filter the SDK exporters' loggers (once per process); the filter holds their last message."""
    global _quieted
    with _quiet_lock:
        if _quieted is None:
            _quieted = _LastMessage()
            for name in EXPORTER_LOGGERS:
                logging.getLogger(name).addFilter(_quieted)
        return _quieted


def stderr_line(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class GuardedExporter(SpanExporter):
    """``inner``, sending to ``endpoint``, that drops a batch at once when the collector does not take TCP
    connections and reports the first failure once through ``warn`` (one line)."""

    def __init__(self, inner: SpanExporter, endpoint: str, warn: Callable[[str], None] = stderr_line,
                 report: Callable[[str], None] | None = None) -> None:
        self.inner = inner
        #: Takes every failure's message instead of the log and ``warn`` (in the exporting process).
        self._report = report
        self.endpoint = endpoint
        self._warn = warn
        #: The context it was made in (the run's), so that its events land in the run's ``logs.jsonl``.
        self._context = contextvars.copy_context()
        self._sdk = quiet_sdk_exporters()
        #: Whether the last batch reached the collector: until one did, and after one that did not, a batch
        #: first checks that the collector takes connections.
        self._reachable = False
        self._warned = False
        #: Spans dropped because no collector answered (or it did not take them).
        self.dropped = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self._reachable:
            problem = probe(self.endpoint)
            if problem is not None:
                self.dropped += len(spans)
                self._warn_once(f"no OTLP collector at {self.endpoint} ({problem}): spans are dropped while none "
                                "answers; to see them, start one (agentcompass-otel's README)")
                return SpanExportResult.FAILURE
        self._sdk.message = None
        result = self.inner.export(spans)
        self._reachable = result is SpanExportResult.SUCCESS
        if not self._reachable:
            self.dropped += len(spans)
            from agentcompass.runtime.shortening import shorten  # only on a failure (the exporting process)

            reason = shorten(self._sdk.message or "no reason given", REASON_CHARS)
            self._warn_once(f"the OTLP collector at {self.endpoint} did not take this run's spans ({reason}); "
                            "spans that fail are dropped")
        return result

    def _warn_once(self, message: str) -> None:
        if self._report is not None:
            self._report(message)
            return
        from agentcompass.runtime.logs import get_logger

        with contextlib.suppress(Exception):  # the run's log may be closed (or the context in use): the line stays
            self._context.run(get_logger(plugin="otel").warning, "otel.export_failed", endpoint=self.endpoint,
                              detail=message)
        if not self._warned:
            self._warned = True
            self._warn(f"warning: otel: {message}")

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
