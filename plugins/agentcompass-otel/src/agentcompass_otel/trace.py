"""The spans of one traced run, made from the records the plugin's hooks hand over (plain tuples): the part of
tracing that runs where the spans are made and exported — the exporting process
(:mod:`agentcompass_otel.export_process`), or the run's own for an exporter a caller passes. It imports nothing
of agentcompass, so that the exporting process starts quickly; the hooks and the records are in
:mod:`agentcompass_otel.tracing`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import Span, SpanContext, SpanKind, Status

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
#: The error of an attempt still open when its run ended.
CANCELLED = "cancelled: the run ended before the attempt did"



def traces_endpoint(protocol: str) -> str:
    """Where the SDK's exporter of ``protocol`` sends spans, from the standard variables as it reads them."""
    explicit = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or "").strip()
    if explicit:
        return explicit
    base = (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "").strip()
    if protocol == "grpc":
        return base or "http://localhost:4317"
    return (base or "http://localhost:4318").rstrip("/") + "/v1/traces"


def make_exporter(protocol: str, report: Callable[[str], None] | None = None) -> SpanExporter:
    """The SDK's OTLP span exporter of ``protocol`` (``http/protobuf`` or ``grpc``, checked by the caller), reading
    its endpoint, headers, timeout and TLS settings from ``OTEL_EXPORTER_OTLP_[TRACES_]*`` itself; wrapped in a
    :class:`~agentcompass_otel.delivery.GuardedExporter` (no collector: one warning line, no wait), which hands
    each failure to ``report`` when given (the exporting process: the run's process reports it)."""
    from agentcompass_otel.delivery import GuardedExporter

    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GuardedExporter(GrpcExporter(), traces_endpoint(protocol), report=report)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return GuardedExporter(OTLPSpanExporter(), traces_endpoint(protocol), report=report)


def _hashed_once(resource: Resource) -> Resource:
    """``resource``, its hash computed once: the SDK's OTLP encoder hashes the resource of every span it encodes
    (a JSON dump of its attributes each time), and a resource's attributes cannot change."""
    from opentelemetry.sdk.resources import Resource

    class HashedOnce(Resource):
        def __init__(self, attributes: Any, schema_url: str | None = None) -> None:
            super().__init__(attributes, schema_url)
            self._hash = super().__hash__()

        def __hash__(self) -> int:
            return self._hash

    return HashedOnce(resource.attributes, resource.schema_url)


def provider_of(model_id: str) -> str:
    """The GenAI ``system`` of a model id: its provider (``openai`` of ``openai/gpt-4o``; ``mock``)."""
    return model_id.split("/", 1)[0] if "/" in model_id else model_id


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


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
    calls: list[tuple[int, Call, bool]] = attrs.field(factory=list)
    #: When the last phase ended, if a phase event with no phase of ours (the attempt closing) ended it (ns).
    phase_closed_at: int | None = None


@attrs.define
class _Ended:
    """An ended attempt, kept for the model calls that end after it: its span and its phases' spans."""

    span_id: int
    #: ``(phase start ns, phase span id)`` in order.
    phases: list[tuple[int, int]]


class Call(NamedTuple):
    """What a model-call span is made of (the fields of ``ModelCallEvent`` it uses), as a plain tuple."""

    task_id: str
    trial: int
    attempt: int
    role: str
    model: str
    via: str
    started_at: float
    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    error: str | None
    attempts: int
    cost_usd: float | None
    protocol: str | None
    cached_tokens: int | None
    reasoning_tokens: int | None
    ttft_s: float | None


#: What the hooks hand to a trace, as plain tuples (cheap to make, and to pickle to the exporting process):
#: ``("start", run_id, request attributes, roles, benchmark, run_dir, ns)``, ``("phase", task_id, trial, attempt,
#: phase, ns)``, ``("end", task_id, trial, attempt, status, error, metrics, retried, ns)``, ``("call", Call
#: fields...)``, ``("finish", summary attributes or None, ns)``.
Record = tuple[Any, ...]


@attrs.define
class RunTrace:
    """The spans of one run in progress, made from the hooks' records (:data:`Record`), with the times the
    records carry.

    The run's span is a live SDK span. An attempt's spans (the attempt, its phases, its model calls) are made
    when it ends, in one batch, as finished ``ReadableSpan`` objects with the times the events gave, and handed
    to the batch processor: the same tree and timestamps as live spans, for a fraction of their cost (no
    context, sampler, locks or attribute copies per span while the run goes). It runs in the exporting process
    (:mod:`agentcompass_otel.export_process`), or in the run's process for an exporter a caller passes."""

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
    _parts: tuple[Any, ...] = attrs.field(init=False)
    closed: bool = False

    def __attrs_post_init__(self) -> None:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        # what every span is made with, looked up once (the flags and the unset status are immutable)
        self._parts = (ReadableSpan, SpanContext, SpanKind.INTERNAL, TraceFlags(TraceFlags.SAMPLED),
                       Status(StatusCode.UNSET))
        self._root_context = self.root.get_span_context()
        self._recording = self.root.is_recording()
        self._ids = self.provider.id_generator

    @classmethod
    def open(cls, exporter: SpanExporter, start: Record) -> RunTrace:
        """The trace of the run a ``start`` record describes, exporting through ``exporter``."""
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        from agentcompass_otel import __version__

        _, _run_id, attributes, roles, benchmark, run_dir, started = start
        resource = Resource.create()
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
        # the run's end shuts it down
        provider = TracerProvider(resource=_hashed_once(resource), shutdown_on_exit=False)
        queue = int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or QUEUE_SIZE)
        processor = BatchSpanProcessor(exporter, max_queue_size=queue)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("agentcompass_otel", __version__)
        root = tracer.start_span(f"run {benchmark}", attributes=attributes, start_time=started)
        return cls(provider, processor, root, benchmark, roles, _primary_metric(run_dir), provider.resource,
                   InstrumentationScope("agentcompass_otel", __version__))

    def apply(self, record: Record) -> None:
        """Take one record of the run (after its ``start``)."""
        kind = record[0]
        if kind == "phase":
            self.phase(record[1:4], record[4], record[5])
        elif kind == "end":
            self.end(record[1:4], record[4], record[5], record[6], record[7], record[8], record[9])
        elif kind == "call":
            self.model_call(Call._make(record[1:]))
        elif kind == "finish":
            self.finish(record[1], record[2])

    def phase(self, key: tuple[str, int, int], phase: str | None, now: int) -> None:
        attempt = self.attempts.get(key)
        if attempt is None:
            attempt = self.attempts[key] = _Attempt(now)
        name = PHASES.get(phase or "")
        if name is not None:
            attempt.phases.append((name, now))
            attempt.phase_closed_at = None
        elif attempt.phases and attempt.phase_closed_at is None:
            attempt.phase_closed_at = now

    def end(self, key: tuple[str, int, int], status: str, error: str | None, status_message: str | None,
            metrics: Mapping[str, float], retried: bool, now: int) -> None:
        found = self.attempts.pop(key, None)
        if found is None:
            return
        ended = self._end_attempt(found, key, status, error, status_message, metrics, now, retried=retried)
        self.finished[key] = ended
        if len(self.finished) > KEPT_FINISHED:
            self.finished.popitem(last=False)

    def _span(self, name: str, span_id: int, parent: int, start: int, end: int, attributes: dict[str, Any],
              status: Status | None = None, kind: SpanKind | None = None) -> None:
        readable_span, span_context, internal, sampled, unset = self._parts
        root = self._root_context
        context = span_context(root.trace_id, span_id, False, sampled, root.trace_state)
        parent_context = span_context(root.trace_id, parent, False, sampled, root.trace_state)
        span = readable_span(name=name, context=context, parent=parent_context, resource=self.resource,
                             attributes=attributes, kind=kind or internal, start_time=start, end_time=end,
                             instrumentation_scope=self.scope, status=unset if status is None else status)
        self.processor.on_end(span)

    def _end_attempt(self, attempt: _Attempt, key: tuple[str, int, int], status: str, error: str | None,
                     status_message: str | None, metrics: Mapping[str, float], end: int,
                     retried: bool = False) -> _Ended:
        from opentelemetry.trace import Status, StatusCode

        task_id = key[0]
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
                attributes["agentcompass.error"] = error
            span_status = Status(StatusCode.ERROR, status_message or status)
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

    def model_call(self, event: Call) -> None:
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

    def _call_span(self, event: Call, start: int, parent: int, *, after_end: bool) -> None:
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
            status = Status(StatusCode.ERROR, event.error)
        self._span(f"chat {model_id}", self._ids.generate_span_id(), parent, start, start + _ns(event.latency_s),
                   attributes, status, SpanKind.CLIENT)

    def finish(self, attributes: Mapping[str, Any] | None, now: int | None = None) -> None:
        """End every open span (attempts an interruption cut short end ``CANCELLED``) and flush the trace;
        ``attributes``: the run's summary, for its span (``None``: no summary)."""
        now = now or time.time_ns()
        for key, attempt in list(self.attempts.items()):
            self._end_attempt(attempt, key, "CANCELLED", CANCELLED, f"CANCELLED: {CANCELLED}", {}, now)
        self.attempts.clear()
        if attributes:
            self.root.set_attributes(dict(attributes))
        self.root.end(end_time=now)
        self.closed = True
        # The exporter retries an unreachable collector with back-off: wait for it at most FLUSH_MILLIS, so a
        # dead collector never holds the run's end (what it did not take is lost, and logged by the SDK).
        closing = threading.Thread(target=self.provider.shutdown, name="agentcompass-otel-shutdown", daemon=True)
        closing.start()
        closing.join(FLUSH_MILLIS / 1000)
