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

Spans go through the SDK's ``BatchSpanProcessor`` (exported on its own thread) to the exporter the standard
``OTEL_EXPORTER_OTLP_*`` variables configure (:func:`otlp_exporter`); the run's end flushes them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from agentcompass import hookimpl
from agentcompass.errors import UsageError
from agentcompass.runtime.shortening import shorten

if TYPE_CHECKING:
    from agentcompass.runtime.records import ModelCallEvent, RunSummary, TaskEvent
    from agentcompass.runtime.types import RunRequest
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import Span, SpanContext, SpanKind, Status

#: ``agentcompass run --otel`` sets it (to ``1``); the plugin traces runs while it is set to a true value.
ENABLE_ENV = "AGENTCOMPASS_OTEL"
#: Characters kept of an error message in a span.
MAX_ERROR = 1000
#: Spans the batch processor holds before it drops any (``OTEL_BSP_MAX_QUEUE_SIZE`` overrides): a run of
#: 10,000 tasks makes about ten spans per task, exported as it goes.
QUEUE_SIZE = 65536
#: How long the run's end waits for its spans to be exported.
FLUSH_MILLIS = 15_000
#: Finished attempts remembered for model calls still in flight when their attempt ended (a timeout).
KEPT_FINISHED = 4096
PHASES = {"PREPARING": "prepare", "RUNNING": "run", "COLLECTING": "collect", "EVALUATING": "evaluate"}
SERVICE_NAME = "agentcompass"


def enabled_by_env() -> bool:
    return os.environ.get(ENABLE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def otlp_exporter() -> SpanExporter:
    """The OTLP span exporter the standard variables ask for: ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` or
    ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf``, the default, or ``grpc``), each exporter reading its
    endpoint, headers, timeout and TLS settings from ``OTEL_EXPORTER_OTLP_[TRACES_]*`` itself; wrapped in a
    :class:`~agentcompass_otel.delivery.GuardedExporter` (no collector: one warning line, no wait)."""
    from agentcompass_otel.delivery import GuardedExporter, traces_endpoint

    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return GuardedExporter(OTLPSpanExporter(), traces_endpoint(protocol))
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError:
            raise UsageError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter: "
                             "pip install 'agentcompass-otel[grpc]'") from None
        return GuardedExporter(GrpcExporter(), traces_endpoint(protocol))
    raise UsageError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; use http/protobuf or grpc")


def provider_of(model_id: str) -> str:
    """The GenAI ``system`` of a model id: its provider (``openai`` of ``openai/gpt-4o``; ``mock``)."""
    return model_id.split("/", 1)[0] if "/" in model_id else model_id


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _cut(text: str | None) -> str | None:
    if text is None:
        return None
    return shorten(text, MAX_ERROR)


def _primary_metric(run_dir: str) -> str | None:
    """The metric contract's primary metric, from ``run.json`` (written before the run starts)."""
    try:
        info = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
        primary = info["plan"]["metric_contract"]["primary"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return primary if isinstance(primary, str) else None


def _parent_at(start: int, attempt_id: int, phases: list[tuple[int, int]]) -> int:
    """The span a model call that began at ``start`` goes under: the last phase begun by then, else the attempt."""
    parent = attempt_id
    for phase_start, phase_id in phases:
        if phase_start > start:
            break
        parent = phase_id
    return parent


@attrs.define
class _Attempt:
    """What an attempt in progress has shown so far; its spans are made in one batch when it ends."""

    start: int
    #: Every phase so far: ``(name, start ns)``; each ends where the next starts (the last where the attempt ends).
    phases: list[tuple[str, int]] = attrs.field(factory=list)
    #: Model calls so far: ``(start ns, event, whether it came outside any open phase)``.
    calls: list[tuple[int, ModelCallEvent, bool]] = attrs.field(factory=list)
    #: When the last phase ended, if a phase event with no phase of ours (the attempt closing) ended it (ns).
    phase_closed_at: int | None = None


@attrs.define
class _Ended:
    """An ended attempt, kept for the model calls that end after it: its span and its phases' spans."""

    span_id: int
    #: ``(phase start ns, phase span id)`` in order.
    phases: list[tuple[int, int]]


@attrs.define
class RunTrace:
    """The spans of one run in progress.

    The run's span is a live SDK span. An attempt's spans (the attempt, its phases, its model calls) are made
    when it ends, in one batch, as finished ``ReadableSpan`` objects with the times the events gave, and handed
    to the batch processor: the same tree and timestamps as live spans, for a fraction of their cost (no
    context, sampler, locks or attribute copies per span while the run goes)."""

    provider: TracerProvider
    processor: SpanProcessor
    root: Span
    benchmark: str
    roles: Mapping[str, str]
    primary: str | None
    resource: Resource
    scope: InstrumentationScope
    attempts: dict[tuple[str, int, int], _Attempt] = attrs.field(factory=dict)
    #: The last :data:`KEPT_FINISHED` attempts that ended, for the model calls that end after them.
    finished: OrderedDict[tuple[str, int, int], _Ended] = attrs.field(factory=OrderedDict)
    _root_context: SpanContext = attrs.field(init=False)
    #: The sampler's verdict on the run's span holds for all its spans.
    _recording: bool = attrs.field(init=False)
    _ids: IdGenerator = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._root_context = self.root.get_span_context()
        self._recording = self.root.is_recording()
        self._ids = self.provider.id_generator

    def _attempt(self, task_id: str, trial: int, attempt: int) -> _Attempt:
        key = (task_id, trial, attempt)
        found = self.attempts.get(key)
        if found is None:
            found = self.attempts[key] = _Attempt(time.time_ns())
        return found

    def task_event(self, event: TaskEvent) -> None:
        if event.event == "task.phase":
            attempt = self._attempt(event.task_id, event.trial, event.attempt)
            now = time.time_ns()
            name = PHASES.get(event.phase or "")
            if name is not None:
                attempt.phases.append((name, now))
                attempt.phase_closed_at = None
            elif attempt.phases and attempt.phase_closed_at is None:
                attempt.phase_closed_at = now
            return
        key = (event.task_id, event.trial, event.attempt)
        found = self.attempts.pop(key, None)
        if found is None:
            return
        ended = self._end_attempt(found, event.task_id, key, event.status or "", event.error, event.metrics,
                                  retried=event.event == "task.retry")
        self.finished[key] = ended
        if len(self.finished) > KEPT_FINISHED:
            self.finished.popitem(last=False)

    def _span(self, name: str, span_id: int, parent: int, start: int, end: int, attributes: dict[str, Any],
              status: Status | None = None, kind: SpanKind | None = None) -> None:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        root = self._root_context
        context = SpanContext(root.trace_id, span_id, False, TraceFlags(TraceFlags.SAMPLED), root.trace_state)
        parent_context = SpanContext(root.trace_id, parent, False, TraceFlags(TraceFlags.SAMPLED),
                                     root.trace_state)
        span = ReadableSpan(name=name, context=context, parent=parent_context, resource=self.resource,
                            attributes=attributes, kind=kind or SpanKind.INTERNAL, start_time=start, end_time=end,
                            instrumentation_scope=self.scope,
                            status=Status(StatusCode.UNSET) if status is None else status)
        self.processor.on_end(span)

    def _end_attempt(self, attempt: _Attempt, task_id: str, key: tuple[str, int, int], status: str,
                     error: str | None, metrics: Mapping[str, float], retried: bool = False) -> _Ended:
        from opentelemetry.trace import Status, StatusCode

        end = time.time_ns()
        span_id = self._ids.generate_span_id()
        phases = [(start, self._ids.generate_span_id()) for _, start in attempt.phases]
        ended = _Ended(span_id, phases)
        if not self._recording:
            return ended
        attributes: dict[str, Any] = {
            "agentcompass.benchmark": self.benchmark, "agentcompass.task.id": task_id,
            "agentcompass.trial": key[1], "agentcompass.attempt": key[2], "agentcompass.status": status}
        if retried:
            attributes["agentcompass.retried"] = True
        for name, value in metrics.items():
            attributes[f"agentcompass.metric.{name}"] = float(value)
        if self.primary is not None and self.primary in metrics:
            attributes["agentcompass.score"] = float(metrics[self.primary])
        span_status = None
        if status != "COMPLETED":
            if error:
                attributes["agentcompass.error"] = _cut(error) or ""
            span_status = Status(StatusCode.ERROR, _cut(f"{status}: {error}" if error else status))
        self._span(f"task {task_id}", span_id, self._root_context.span_id, attempt.start, end, attributes,
                   span_status)
        last = len(attempt.phases) - 1
        for i, ((name, start), (_, phase_id)) in enumerate(zip(attempt.phases, phases, strict=True)):
            stop = attempt.phases[i + 1][1] if i < last else (attempt.phase_closed_at or end)
            self._span(name, phase_id, span_id, start, stop,
                       {"agentcompass.phase": name, "agentcompass.task.id": task_id})
        for start, call, outside in attempt.calls:
            self._call_span(call, start, _parent_at(start, span_id, phases), after_end=outside)
        return ended

    def model_call(self, event: ModelCallEvent) -> None:
        key = (event.task_id, event.trial, event.attempt)
        start = _ns(event.started_at)
        attempt = self.attempts.get(key)
        if attempt is not None:  # made with the attempt's spans, under the phase it began in
            # outside any phase (none yet, or the last one closed): shown, flagged as after the attempt's end
            outside = not attempt.phases or attempt.phase_closed_at is not None
            attempt.calls.append((start, event, outside))
            return
        # A call that ended after its attempt did (a gateway call still in flight when a timeout ended the run
        # phase): shown, though the attempt's recorded trajectory ended without it.
        parent = self._root_context.span_id
        ended = self.finished.get(key)
        if ended is not None:
            parent = _parent_at(start, ended.span_id, ended.phases)
        if self._recording:
            self._call_span(event, start, parent, after_end=True)

    def _call_span(self, event: ModelCallEvent, start: int, parent: int, *, after_end: bool) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        model_id = self.roles.get(event.role, event.model)
        system = provider_of(model_id)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.system": system, "gen_ai.provider.name": system,
            "gen_ai.request.model": model_id, "gen_ai.response.model": event.model,
            "gen_ai.usage.input_tokens": event.prompt_tokens, "gen_ai.usage.output_tokens": event.completion_tokens,
            "agentcompass.role": event.role, "agentcompass.via": event.via, "agentcompass.task.id": event.task_id,
            "agentcompass.trial": event.trial, "agentcompass.attempt": event.attempt,
            "agentcompass.model.attempts": event.attempts,
        }
        if event.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = (event.finish_reason,)
        if event.cached_tokens is not None:
            attributes["gen_ai.usage.cache_read.input_tokens"] = event.cached_tokens
        if event.reasoning_tokens is not None:
            attributes["gen_ai.usage.reasoning.output_tokens"] = event.reasoning_tokens
        if event.protocol:
            attributes["agentcompass.protocol"] = event.protocol
        if event.ttft_s is not None:
            attributes["agentcompass.ttft_s"] = event.ttft_s
        if event.cost_usd is not None:
            attributes["agentcompass.cost_usd"] = event.cost_usd
        if after_end:
            attributes["agentcompass.after_attempt_end"] = True
        status = None
        if event.error:
            attributes["error.type"] = "ModelError"
            status = Status(StatusCode.ERROR, _cut(event.error))
        self._span(f"chat {model_id}", self._ids.generate_span_id(), parent, start, start + _ns(event.latency_s),
                   attributes, status, SpanKind.CLIENT)

    def finish(self, summary: RunSummary | None) -> None:
        """End every open span (attempts an interruption cut short end ``CANCELLED``) and flush the trace."""
        for key, attempt in list(self.attempts.items()):
            self._end_attempt(attempt, key[0], key, "CANCELLED", "cancelled: the run ended before the attempt did",
                              {})
        self.attempts.clear()
        root = self.root
        if summary is not None:
            for status, n in summary.status_counts.items():
                root.set_attribute(f"agentcompass.status_count.{status}", n)
            root.set_attribute("agentcompass.n_tasks", summary.n_tasks)
            root.set_attribute("agentcompass.interrupted", summary.interrupted)
            aggregate = summary.metrics.overall.get(summary.primary_metric)
            if aggregate is not None and aggregate.mean is not None:
                root.set_attribute("agentcompass.score", aggregate.mean)
            if summary.stopped_reason:
                root.set_attribute("agentcompass.stopped_reason", _cut(summary.stopped_reason) or "")
        root.end()
        # The exporter retries an unreachable collector with back-off: wait for it at most FLUSH_MILLIS, so a
        # dead collector never holds the run's end (what it did not take is lost, and logged by the SDK).
        closing = threading.Thread(target=self.provider.shutdown, name="agentcompass-otel-shutdown", daemon=True)
        closing.start()
        closing.join(FLUSH_MILLIS / 1000)


@attrs.define(eq=False)  # hashable: pluggy keeps plugins in sets
class RunTracing:
    """The plugin: traces every run of this process while enabled (``--otel`` or ``AGENTCOMPASS_OTEL=1``).

    :param exporter_factory: makes the run's span exporter (default :func:`otlp_exporter`); tests pass the
        SDK's in-memory exporter.
    :param enabled: force tracing on or off (default: :data:`ENABLE_ENV`, read as each run starts).
    """

    exporter_factory: Callable[[], SpanExporter] = otlp_exporter
    enabled: bool | None = None
    runs: dict[str, RunTrace] = attrs.field(factory=dict)

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
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        from agentcompass_otel import __version__

        resource = Resource.create()
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # the run's end shuts it down
        queue = int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or QUEUE_SIZE)
        processor = BatchSpanProcessor(self.exporter_factory(), max_queue_size=queue)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("agentcompass_otel", __version__)
        roles = {"agent": request.model, **dict(request.models.roles)}
        root = tracer.start_span(f"run {request.benchmark}", attributes={
            "agentcompass.run_id": run_id, "agentcompass.benchmark": request.benchmark,
            "agentcompass.harness": request.harness, "agentcompass.model": roles.get("agent", request.model),
            "agentcompass.environment": request.environment, "agentcompass.executor": request.execution.executor,
            "agentcompass.trials": request.tasks.trials, "gen_ai.request.model": roles.get("agent", request.model),
            **({"agentcompass.seed": request.tasks.seed} if request.tasks.seed is not None else {}),
        })
        self.runs[run_id] = RunTrace(provider, processor, root, request.benchmark, roles, _primary_metric(run_dir),
                                     provider.resource, InstrumentationScope("agentcompass_otel", __version__))

    @hookimpl
    def agentcompass_task_event(self, event: TaskEvent) -> None:
        trace = self.runs.get(event.run_id)
        if trace is not None:
            trace.task_event(event)

    @hookimpl
    def agentcompass_model_call(self, event: ModelCallEvent) -> None:
        trace = self.runs.get(event.run_id)
        if trace is not None:
            trace.model_call(event)

    @hookimpl
    def agentcompass_run_finished(self, run_id: str, summary: RunSummary) -> None:
        trace = self.runs.pop(run_id, None)
        if trace is not None:
            trace.finish(summary)
