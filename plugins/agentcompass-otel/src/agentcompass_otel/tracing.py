"""OpenTelemetry spans of agentcompass runs, built from the observer hooks.

The tree of one run (one trace)::

    run <benchmark>                          agentcompass.run_id, .benchmark, .harness, .model, ... , .score
    └── task <task id>                       one span per attempt: .task.id, .trial, .attempt, .status, .score
        ├── prepare | run | collect | evaluate    one span per phase the attempt went through
        │   └── chat <model>                 one span per model call (gateway calls too, under ``run``),
        │                                    with the GenAI semantic conventions' attributes
        └── ...

Attributes are a fixed list of names, numbers and statuses: never a message, a prompt, a reply, a tool
argument or an environment variable. The only free text is an error message, which the runner masks of the
run's secrets before any observer sees it (and which is cut to :data:`MAX_ERROR` characters).

The hooks turn each event into a plain tuple (a :data:`~agentcompass_otel.trace.Record`); the spans are made
from them by :class:`~agentcompass_otel.trace.RunTrace` and go through the SDK's ``BatchSpanProcessor`` to the
exporter the standard ``OTEL_EXPORTER_OTLP_*`` variables configure (:func:`otlp_exporter`), in a child process
(:mod:`agentcompass_otel.export_process`); the run's end flushes them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
from agentcompass import hookimpl
from agentcompass.errors import UsageError
from agentcompass.runtime.shortening import shorten

from agentcompass_otel.trace import (  # noqa: F401  (the names this module had)
    FLUSH_MILLIS,
    KEPT_FINISHED,
    MAX_ERROR,
    PHASES,
    QUEUE_SIZE,
    SERVICE_NAME,
    Call,
    Record,
    RunTrace,
    make_exporter,
    provider_of,
    traces_endpoint,
)

if TYPE_CHECKING:
    from agentcompass.runtime.records import ModelCallEvent, RunSummary, TaskEvent
    from agentcompass.runtime.types import RunRequest
    from opentelemetry.sdk.trace.export import SpanExporter

#: ``agentcompass run --otel`` sets it (to ``1``); the plugin traces runs while it is set to a true value.
ENABLE_ENV = "AGENTCOMPASS_OTEL"


def enabled_by_env() -> bool:
    return os.environ.get(ENABLE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def export_protocol() -> str:
    """The OTLP protocol the standard variables ask for: ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` or
    ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf``, the default, or ``grpc``); a clear error for another, or
    for ``grpc`` without its exporter installed. Imports nothing of OpenTelemetry."""
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip()
    if protocol == "grpc":
        import importlib.util

        if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.grpc") is None:
            raise UsageError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter: "
                             "pip install 'agentcompass-otel[grpc]'")
    elif protocol != "http/protobuf":
        raise UsageError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; use http/protobuf or grpc")
    return protocol


def otlp_exporter(report: Callable[[str], None] | None = None) -> SpanExporter:
    """The OTLP span exporter :func:`export_protocol` asks for (:func:`~agentcompass_otel.trace.make_exporter`)."""
    return make_exporter(export_protocol(), report)


def _cut(text: str | None) -> str | None:
    if text is None:
        return None
    return shorten(text, MAX_ERROR)


def start_record(run_id: str, request: RunRequest, run_dir: str) -> Record:
    roles = {"agent": request.model, **dict(request.models.roles)}
    attributes = {
        "agentcompass.run_id": run_id, "agentcompass.benchmark": request.benchmark,
        "agentcompass.harness": request.harness, "agentcompass.model": roles.get("agent", request.model),
        "agentcompass.environment": request.environment, "agentcompass.executor": request.execution.executor,
        "agentcompass.trials": request.tasks.trials, "gen_ai.request.model": roles.get("agent", request.model),
        **({"agentcompass.seed": request.tasks.seed} if request.tasks.seed is not None else {}),
    }
    return ("start", run_id, attributes, roles, request.benchmark, run_dir, time.time_ns())


def task_record(event: TaskEvent) -> Record:
    if event.event == "task.phase":
        return ("phase", event.task_id, event.trial, event.attempt, event.phase, time.time_ns())
    status = event.status or ""
    error = message = None
    if status != "COMPLETED":  # cut here, in the run's process: the exporting process imports nothing of ours
        error = _cut(event.error) if event.error else None
        message = _cut(f"{status}: {event.error}" if event.error else status)
    return ("end", event.task_id, event.trial, event.attempt, status, error, message, dict(event.metrics),
            event.event == "task.retry", time.time_ns())


def call_record(e: ModelCallEvent) -> Record:
    error = _cut(e.error) if e.error else None
    return ("call", e.task_id, e.trial, e.attempt, e.role, e.model, e.via, e.started_at, e.latency_s,
            e.prompt_tokens, e.completion_tokens, e.finish_reason, error, e.attempts, e.cost_usd, e.protocol,
            e.cached_tokens, e.reasoning_tokens, e.ttft_s)


def finish_record(summary: RunSummary | None) -> Record:
    attributes: dict[str, Any] | None = None
    if summary is not None:
        attributes = {f"agentcompass.status_count.{status}": n for status, n in summary.status_counts.items()}
        attributes["agentcompass.n_tasks"] = summary.n_tasks
        attributes["agentcompass.interrupted"] = summary.interrupted
        aggregate = summary.metrics.overall.get(summary.primary_metric)
        if aggregate is not None and aggregate.mean is not None:
            attributes["agentcompass.score"] = aggregate.mean
        if summary.stopped_reason:
            attributes["agentcompass.stopped_reason"] = _cut(summary.stopped_reason) or ""
    return ("finish", attributes, time.time_ns())


class _InProcess:
    """A run's trace made in this process, record by record (for an exporter a caller passes)."""

    def __init__(self, trace: RunTrace) -> None:
        self.trace = trace

    def send(self, record: Record) -> None:
        self.trace.apply(record)

    def close(self, record: Record) -> None:
        self.trace.apply(record)


@attrs.define(eq=False)  # hashable: pluggy keeps plugins in sets
class RunTracing:
    """The plugin: traces every run of this process while enabled (``--otel`` or ``AGENTCOMPASS_OTEL=1``).

    The hooks only turn each event into a plain tuple (:data:`Record`). With the OTLP exporter (the default)
    the spans are made, encoded and exported by a child process (:mod:`agentcompass_otel.export_process`), which
    gets the records in batches off the event loop: the run's process pays little more than the tuples.

    :param exporter_factory: makes the run's span exporter (default :func:`otlp_exporter`, in the exporting
        process); tests pass the SDK's in-memory exporter, which is then used in this process.
    :param enabled: force tracing on or off (default: :data:`ENABLE_ENV`, read as each run starts).
    """

    exporter_factory: Callable[[], SpanExporter] = otlp_exporter
    enabled: bool | None = None
    runs: dict[str, Any] = attrs.field(factory=dict)

    def is_enabled(self) -> bool:
        return self.enabled if self.enabled is not None else enabled_by_env()

    def agentcompass_observing(self) -> bool:
        """Asked when the plugin is registered (:data:`agentcompass.plugins.OBSERVING_ATTR`): while tracing is off
        no hook of this plugin is registered, so a run pays nothing for it, not even a call per event."""
        return self.is_enabled()

    @hookimpl
    def agentcompass_run_started(self, run_id: str, request: RunRequest, run_dir: str) -> None:
        if not self.is_enabled():
            return
        start = start_record(run_id, request, run_dir)
        if self.exporter_factory is otlp_exporter:
            from agentcompass_otel.export_process import ExportProcess

            protocol = export_protocol()
            self.runs[run_id] = ExportProcess.launch(start, protocol, traces_endpoint(protocol))
        else:
            self.runs[run_id] = _InProcess(RunTrace.open(self.exporter_factory(), start))

    @hookimpl
    def agentcompass_task_event(self, event: TaskEvent) -> None:
        sink = self.runs.get(event.run_id)
        if sink is not None:
            sink.send(task_record(event))

    @hookimpl
    def agentcompass_model_call(self, event: ModelCallEvent) -> None:
        sink = self.runs.get(event.run_id)
        if sink is not None:
            sink.send(call_record(event))

    @hookimpl
    def agentcompass_run_finished(self, run_id: str, summary: RunSummary) -> None:
        sink = self.runs.pop(run_id, None)
        if sink is not None:
            sink.close(finish_record(summary))
