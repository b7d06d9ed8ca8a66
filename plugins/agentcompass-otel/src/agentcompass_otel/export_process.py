"""The exporting process of a traced run: spans made, encoded and sent off the run's process.

The run's observer hooks turn each event into a plain tuple (:data:`~agentcompass_otel.tracing.Record`) and
queue it; a thread of the run's process sends the queue to this child process every :data:`SEND_INTERVAL`
seconds (sooner past :data:`SEND_BATCH` records), pickled, length-prefixed, over its standard input. The child
(``python -m agentcompass_otel.export_process``) applies them to a :class:`~agentcompass_otel.tracing.RunTrace`
with the OTLP exporter the standard variables configure (its ``BatchSpanProcessor`` exporting on the child's
own thread), and writes each export failure as a JSON line on its standard output; the run's process logs it
as ``otel.export_failed`` in the run's ``logs.jsonl`` and prints the first as one warning line. The protobuf
encoding and the HTTP export, the larger part of tracing's cost, so never compete with the run's event loop
for the interpreter's lock, and the run's process imports nothing of OpenTelemetry.

The run's end sends the last records and waits for the child to flush them, at most
:data:`~agentcompass_otel.tracing.FLUSH_MILLIS` (plus the child's start-up), as before.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import json
import os
import pickle
import struct
import subprocess
import sys
import threading
from typing import IO

from agentcompass_otel.trace import FLUSH_MILLIS, Record, make_exporter

#: Seconds between two sends of the queued records to the exporting process.
SEND_INTERVAL = 0.5
#: Queued records that wake the sending thread before its interval is up.
SEND_BATCH = 4096
#: Seconds the run's end waits for the exporting process beyond the flush itself (its start-up, if still going).
EXIT_MARGIN = 10.0
HEADER = struct.Struct("!I")


def stderr_line(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class ExportProcess:
    """The run's side: queues records, sends them to the exporting process, reports what it reports."""

    def __init__(self, proc: subprocess.Popen[bytes], endpoint: str, start: Record) -> None:
        self.proc = proc
        self.endpoint = endpoint
        #: The run's context, so that the reports land in the run's ``logs.jsonl``.
        self._context = contextvars.copy_context()
        self._queue: collections.deque[Record] = collections.deque([start])
        self._wake = threading.Event()
        self._closing = False
        self._warned = False
        self._broken = False
        self._sender = threading.Thread(target=self._send_loop, name="agentcompass-otel-send", daemon=True)
        self._reader = threading.Thread(target=self._read_loop, name="agentcompass-otel-reports", daemon=True)
        self._wake.set()  # the start record goes at once
        self._sender.start()
        self._reader.start()

    @classmethod
    def launch(cls, start: Record, protocol: str, endpoint: str) -> ExportProcess:
        """Start the exporting process of the run ``start`` describes, exporting over ``protocol`` (checked)."""
        proc = subprocess.Popen([sys.executable, "-m", "agentcompass_otel.export_process", protocol],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=dict(os.environ))
        return cls(proc, endpoint, start)

    def send(self, record: Record) -> None:
        queue = self._queue
        queue.append(record)
        if len(queue) == SEND_BATCH:
            self._wake.set()

    def close(self, record: Record) -> None:
        """Send the run's last record and wait for the exporting process to export what it has and exit."""
        self._queue.append(record)
        self._closing = True
        self._wake.set()
        self._sender.join()
        try:
            self.proc.wait(FLUSH_MILLIS / 1000 + EXIT_MARGIN)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(1.0)

    def _send_loop(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        while True:
            self._wake.wait(SEND_INTERVAL)
            self._wake.clear()
            closing = self._closing
            batch = []
            queue = self._queue
            while queue:
                batch.append(queue.popleft())
            if batch and not self._broken:
                data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
                try:
                    stdin.write(HEADER.pack(len(data)))
                    stdin.write(data)
                    stdin.flush()
                except OSError:
                    self._broken = True
                    self._report("the exporting process ended early; spans of this run are dropped")
            if closing:
                break
        with contextlib.suppress(OSError):
            stdin.close()

    def _read_loop(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        for line in stdout:
            try:
                detail = json.loads(line)["detail"]
            except (ValueError, KeyError, TypeError):
                continue
            self._report(str(detail))

    def _report(self, message: str) -> None:
        from agentcompass.runtime.logs import get_logger  # the run's process: imported already

        with contextlib.suppress(Exception):  # the run's log may be closed: the line stays
            self._context.run(get_logger(plugin="otel").warning, "otel.export_failed", endpoint=self.endpoint,
                              detail=message)
        if not self._warned:
            self._warned = True
            stderr_line(f"warning: otel: {message}")


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


def serve(stdin: IO[bytes], stdout: IO[str], protocol: str = "http/protobuf") -> None:
    """The child's side: apply the records read from ``stdin`` until the run's ``finish`` (or the end of input:
    the run's process died, and the open spans end as cancelled), writing each export failure to ``stdout``."""
    from agentcompass_otel.trace import RunTrace

    def report(message: str) -> None:
        stdout.write(json.dumps({"detail": message}) + "\n")
        stdout.flush()

    trace: RunTrace | None = None
    try:
        exporter = make_exporter(protocol, report)  # imports the SDK while the run's first records come
        while (header := _read_exactly(stdin, HEADER.size)) is not None:
            data = _read_exactly(stdin, HEADER.unpack(header)[0])
            if data is None:
                break
            batch: list[Record] = pickle.loads(data)
            for record in batch:
                if record[0] == "start":
                    trace = RunTrace.open(exporter, record)
                elif trace is not None:
                    trace.apply(record)
                    if trace.closed:
                        return
    except Exception as exc:  # said to the run's process: never a traceback on its terminal
        report(f"the exporting process failed: {type(exc).__name__}: {exc}")
    finally:
        if trace is not None and not trace.closed:
            trace.finish(None)


def main() -> None:
    serve(sys.stdin.buffer, sys.stdout, sys.argv[1] if len(sys.argv) > 1 else "http/protobuf")


if __name__ == "__main__":
    main()
