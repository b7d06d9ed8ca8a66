"""Metering of model calls: every call of a task attempt becomes a record in its trajectory.

Each record holds the messages, the tools offered, the reply (tool calls included), token usage, latency, the
provider's attempts and the cost when the model has a price. The meter also enforces the budgets
(:mod:`agentcompass.models.budget`) and notices fatal model errors, which stop the run's scheduling.

A record keeps at most :data:`RECORD_LIMIT` bytes (256 KiB) of JSON for its messages, reply and error: when a
call is larger, its longest strings (message contents, tool arguments, data URLs) are masked of the run's
secrets, then cut to a common length that fits, each ending with ``[... N more bytes not recorded]``, and the
record says ``"truncated": {"original_bytes": N, "limit_bytes": 262144}`` (otherwise ``"truncated": null``).
Should the structure alone exceed the limit (tens of thousands of messages), messages from the middle of the
conversation are left out too, replaced by one note naming how many.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import attrs

from agentcompass.errors import describe
from agentcompass.models.budget import BUDGETED_ROLES, LimitReached, RunBudget, RunStopped
from agentcompass.models.call_key import recorded_params, request_key, tool_digests
from agentcompass.models.prices import Price
from agentcompass.redaction import Redactor
from agentcompass.runtime.attempt_spec import AttemptSpec
from agentcompass.runtime.harness import AttemptLimits
from agentcompass.runtime.model_stream import StreamAssembler, StreamEnd, StreamEvent
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError
from agentcompass.runtime.types import RunResult, TaskStatus

#: The key of a request with no messages, tools or settings (what a passed-through call begins with, until the
#: request is read for its record): computed once, not per call.
EMPTY_REQUEST_KEY = request_key([])


@attrs.define
class CallRecord:
    role: str
    model: str
    started_at: float
    latency_s: float
    messages: list[Any]
    tools: list[str]
    response: Mapping[str, Any] | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    via: str = "client"
    finish_reason: str | None = None
    attempts: int = 1
    cost_usd: float | None = None
    #: ``{"original_bytes": N, "limit_bytes": L}`` when the record was cut to :data:`RECORD_LIMIT`.
    truncated: dict[str, int] | None = None
    #: The protocol the caller spoke (``chat``, ``anthropic``, ``responses``; empty for an in-process call)
    #: and the gateway endpoint it called (``/v1/messages``, ...).
    protocol: str = ""
    endpoint: str = ""
    #: The request went to the provider as the agent sent it (same protocol), not through translation.
    passthrough: bool = False
    #: Prompt tokens read from the provider's cache; completion tokens spent on reasoning.
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    #: Seconds from the call to the first piece of the answer (streamed calls).
    ttft_s: float | None = None
    stream: bool = False
    #: The canonical key of the request (:func:`agentcompass.models.call_key.request_key`: messages, tools and
    #: settings, normalised), what ``--replay`` matches calls on; the settings it holds; a digest of each tool's
    #: schema (beside ``tools``, their names).
    request_key: str = ""
    params: dict[str, Any] | None = None
    tool_digests: list[str] = attrs.field(factory=list)
    #: Where the answer came from when not from the live model: ``replay`` (the recording ``--replay`` names),
    #: ``cache`` (``--cache``) or ``live`` (a replay miss sent to the live model, ``--replay-miss live``).
    source: str | None = None
    #: For a cache hit: what the call would have cost (``cost_usd`` is then 0).
    saved_cost_usd: float | None = None
    #: Why the call was cut before its end (its attempt cancelled, timed out or lost, its client gone), or
    #: ``None``. A cut call's tokens are those counted so far, estimated at :data:`CHARS_PER_TOKEN` characters
    #: a token (the request's, and the answer's streamed so far): the provider never reported them.
    cut: str | None = None
    #: The fault ``--faults`` injected into the call (``{"kind", "index", ...}``, see
    #: :mod:`agentcompass.models.faults`), or ``None``.
    fault: dict[str, Any] | None = None

    def bound(self, redactor: Redactor | None, limit: int | None = None) -> None:
        """Cut the record to ``limit`` bytes of JSON (masking what is cut with ``redactor`` first)."""
        limit = RECORD_LIMIT if limit is None else limit
        kept, original = bound_call(
            {"messages": self.messages, "response": self.response, "error": self.error}, redactor, limit)
        if original is None:
            return
        self.messages, self.response, self.error = kept["messages"], kept["response"], kept["error"]
        self.truncated = {"original_bytes": original, "limit_bytes": limit}


#: Bytes of JSON a call record keeps of its messages, reply and error.
RECORD_LIMIT = 256 * 1024
#: Room kept for each cut string's note.
_NOTE_ROOM = 48


_SIZE_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)  # built once: json.dumps builds one a call


def _size(value: Any) -> int:
    return len(_SIZE_ENCODER.encode(value).encode())


def _strings(value: Any, out: list[int]) -> None:
    """The UTF-8 sizes of every string in ``value`` (dictionary keys aside)."""
    if isinstance(value, str):
        out.append(len(value.encode()))
    elif isinstance(value, Mapping):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            _strings(v, out)


def _water_level(sizes: list[int], budget: int) -> int:
    """The largest cap ``c`` with ``sum(min(s, c) for s in sizes) <= budget``."""
    remaining = max(0, budget)
    ordered = sorted(sizes)
    for i, size in enumerate(ordered):
        left = len(ordered) - i
        if size * left > remaining:
            return remaining // left
        remaining -= size
    return ordered[-1] if ordered else 0


def _cut(value: Any, cap: int, redactor: Redactor | None) -> Any:
    """``value`` with every string longer than ``cap`` bytes masked, then cut to ``cap`` bytes plus a note."""
    if isinstance(value, str):
        data = value.encode()
        if len(data) <= cap:
            return value
        masked = redactor.text(value) if redactor is not None else value  # mask before cutting, never after
        data = masked.encode()
        if len(data) <= cap:
            return masked
        kept = data[:max(0, cap - _NOTE_ROOM)].decode("utf-8", errors="ignore")
        return f"{kept}[... {len(data) - len(kept.encode())} more bytes not recorded]"
    if isinstance(value, Mapping):
        return {k: _cut(v, cap, redactor) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cut(v, cap, redactor) for v in value]
    return value


def _blank(value: Any) -> Any:
    """``value`` with every string emptied: its structure, whose size no cut of strings changes."""
    if isinstance(value, str):
        return ""
    if isinstance(value, Mapping):
        return {k: _blank(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_blank(v) for v in value]
    return value


def bound_call(call: dict[str, Any], redactor: Redactor | None,
               limit: int = RECORD_LIMIT) -> tuple[dict[str, Any], int | None]:
    """``call`` cut to at most ``limit`` bytes of JSON, and its original size (None when it was not cut)."""
    original = _size(call)
    if original <= limit:
        return call, None
    sizes: list[int] = []
    _strings(call, sizes)
    budget = limit - _size(_blank(call)) - _NOTE_ROOM * len(sizes)
    kept = call
    for _ in range(6):  # JSON escapes make the sizes approximate: shrink until it fits
        kept = _cut(call, max(_NOTE_ROOM, _water_level(sizes, budget)), redactor)
        excess = _size(kept) - limit
        if excess <= 0:
            return kept, original
        budget -= excess + 64
    # Too many messages for any cut of their strings: leave messages out of the middle too.
    messages = list(kept.get("messages") or [])
    head: list[Any] = []
    tail: list[Any] = []
    room = limit - _size({**kept, "messages": []}) - 200
    while messages:
        from_head = len(head) <= len(tail)
        item = messages[0] if from_head else messages[-1]
        room -= _size(item) + 2  # and its ", "
        if room < 0:
            break
        if from_head:
            head.append(messages.pop(0))
        else:
            tail.insert(0, messages.pop())
    note = [{"role": "agentcompass", "content": f"[... {len(messages)} messages not recorded]"}] if messages else []
    return {**kept, "messages": [*head, *note, *tail]}, original


@attrs.frozen
class MeterPolicy:
    """How every attempt of a run is metered — the one value its :class:`TaskMeter` s are made from.

    :param budget: the run-wide budget and stop signal (``--max-cost``, a fatal model error).
    :param max_tokens: ``--max-tokens-per-task``: tokens of the agent and user roles one attempt may use.
    :param prices: the price of each role's model, when known.
    :param redactor: masks the run's secrets in what a record cuts.
    :param records_calls: keep call records (False on a remote worker: the head's meter records every call it
        relays).
    :param limits: the harness's own limits of each attempt (``BaseHarness.attempt_limits()``), ``None`` for
        none (a run without a harness).
    """

    budget: RunBudget | None = None
    max_tokens: int | None = None
    prices: Mapping[str, Price | None] = attrs.field(factory=dict)
    redactor: Redactor | None = None
    records_calls: bool = True
    limits: AttemptLimits | None = None

    def meter(self, spec: AttemptSpec, on_call: Callable[[AttemptSpec, CallRecord], None] | None = None
              ) -> TaskMeter:
        """The meter of the attempt ``spec``; ``on_call`` is told of every call record it keeps."""
        return TaskMeter(spec.task.task_id, spec.attempt, seed=spec.seed, trial=spec.trial, budget=self.budget,
                         max_tokens=self.max_tokens, prices=dict(self.prices), redactor=self.redactor,
                         records_calls=self.records_calls,
                         agent_max_calls=self.limits.max_calls if self.limits is not None else None,
                         agent_max_tokens=self.limits.max_tokens if self.limits is not None else None,
                         on_call=functools.partial(on_call, spec) if on_call is not None else None)


@attrs.define
class TaskMeter:
    """Collects the model calls of one task attempt. A run makes each from its :class:`MeterPolicy`."""

    task_id: str
    attempt: int
    #: The (task, trial)'s seed, passed to models that accept one (``ModelClient.accepts_seed``).
    seed: int | None = None
    calls: list[CallRecord] = attrs.field(factory=list)
    #: Run-wide budget and stop signal (set when the attempt is granted its models).
    budget: RunBudget | None = None
    #: ``--max-tokens-per-task``: tokens of the agent and user roles this attempt may use.
    max_tokens: int | None = None
    #: Price of each role's model, when known.
    prices: dict[str, Price | None] = attrs.field(factory=dict)
    tokens_used: int = 0
    #: Why a budget refused a call of this attempt.
    limit_reached: str | None = None
    #: The first fatal model error of this attempt (bad credentials, unknown model, a stopped run).
    fatal_error: str | None = None
    #: The first model-provider outage this attempt met (unreachable, refusing connections, 5xx or timeouts
    #: past the client's retries): an infrastructure failure, worth another attempt under ``--retries``.
    outage_error: str | None = None
    #: Masks the run's secrets in what a record cuts (set when the attempt is granted its models).
    redactor: Redactor | None = None
    #: Keep call records (False on a remote worker: the head's meter records every call it relays).
    records_calls: bool = True
    #: The (task, trial) of the attempt.
    trial: int = 1
    #: Told of every call record as it is kept (the runner's model-call observers), or ``None``.
    on_call: Callable[[CallRecord], None] | None = None
    #: The first call nothing could answer (:class:`CallUnanswerable`, a replay miss): the attempt's error.
    unanswerable: str | None = None
    #: Calls begun and not ended yet (:meth:`cut_open_calls` ends them when their attempt ends first).
    open_calls: list[MeteredCall] = attrs.field(factory=list)

    def cut_open_calls(self, why: str) -> None:
        """Record every call still open as cut (``why``), with the tokens counted so far: called on every path
        that ends an attempt (finished, timed out, cancelled, its worker lost), so no call that reached the
        provider goes unrecorded or unbilled."""
        for call in list(self.open_calls):
            call.cut(why)

    # -- the harness's own limits (``BaseHarness.attempt_limits``, from the run's :class:`MeterPolicy`); they
    # count the ``agent`` role only.
    #: Agent calls and agent tokens this attempt may use (``None``: no limit of the harness's).
    agent_max_calls: int | None = None
    agent_max_tokens: int | None = None
    agent_calls: int = 0
    agent_tokens: int = 0

    def _check_agent(self, streamed_tokens: int = 0) -> None:
        """Raise :class:`LimitReached` when the next agent call (or the stream going on) passes a limit of the
        harness's."""
        if self.agent_max_calls is not None and not streamed_tokens and self.agent_calls >= self.agent_max_calls:
            raise LimitReached(f"limit reached: the harness's max_calls={self.agent_max_calls} agent calls per "
                               f"attempt (change it with --harness-arg max_calls=N)", limit="max_calls")
        used = self.agent_tokens + streamed_tokens
        if self.agent_max_tokens is not None and used >= self.agent_max_tokens:
            raise LimitReached(f"limit reached: the harness's max_tokens={self.agent_max_tokens} agent tokens per "
                               f"attempt (used {used}; change it with --harness-arg max_tokens=N)",
                               limit="max_tokens")

    def totals(self) -> dict[str, dict[str, float]]:
        """Per role: calls, prompt/completion tokens, summed latency, errors, and cost when priced."""
        out: dict[str, dict[str, float]] = {}
        for c in self.calls:
            t = out.setdefault(
                c.role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0, "errors": 0}
            )
            t["calls"] += 1
            t["prompt_tokens"] += c.prompt_tokens
            t["completion_tokens"] += c.completion_tokens
            t["latency_s"] += c.latency_s
            t["errors"] += c.error is not None
            if c.cost_usd is not None:
                t["cost_usd"] = t.get("cost_usd", 0.0) + c.cost_usd
            if c.source:  # only runs that replay or cache carry these keys
                t[SOURCE_COUNTS[c.source]] = t.get(SOURCE_COUNTS[c.source], 0) + 1
                if c.source == "cache":
                    t["cache_saved_tokens"] = t.get("cache_saved_tokens", 0) + c.prompt_tokens + c.completion_tokens
                    if c.saved_cost_usd is not None:
                        t["cache_saved_usd"] = t.get("cache_saved_usd", 0.0) + c.saved_cost_usd
        return out

    def check(self, role: str) -> None:
        """Raise :class:`LimitReached` (or ``RunStopped``) when a budget or a stopped run refuses a call."""
        if self.budget is not None:
            self.budget.check()
        if self.max_tokens is not None and role in BUDGETED_ROLES and self.tokens_used >= self.max_tokens:
            raise LimitReached(
                f"limit reached: max_tokens_per_task={self.max_tokens} (used {self.tokens_used})",
                limit="max_tokens_per_task",
            )
        if role == "agent":
            self._check_agent()
            self.agent_calls += 1

    def unfinished(self) -> tuple[str | None, bool]:
        """Whether a failure outside the task cut this attempt short — a provider outage, or an error that
        stops the run (a rejected key, an unknown model) — so its result says nothing about the task: ``(why,
        worth retrying)``, or ``(None, False)``. Such an attempt is recorded as an attempt and its task stays
        unfinished (resumable), never a final error. A budget's refusal is not this (it is ``LIMIT_REACHED``)."""
        if self.limit_reached:
            return None, False
        if self.fatal_error:
            return f"model call failed: {self.fatal_error}", False
        if self.outage_error:
            return f"model provider outage: {self.outage_error}", True
        return None, False

    def settle(self, result: RunResult) -> RunResult:
        """The run phase's result, corrected by what the meter saw: a refused call makes it ``LIMIT_REACHED``
        (whatever the code that made the call did with the refusal); a call nothing could answer (a replay miss)
        makes it ``RUN_ERROR`` naming the call; a fatal model error names the cause."""
        if self.unanswerable:
            return replace(result, status=TaskStatus.RUN_ERROR, error=self.unanswerable, error_phase="run",
                           metrics={})
        if self.limit_reached:
            return replace(
                result, status=TaskStatus.LIMIT_REACHED, error=self.limit_reached, error_phase="run", metrics={}
            )
        why, _ = self.unfinished()
        if why and result.status is TaskStatus.RUN_ERROR:
            return replace(result, error=why)
        return result


#: The counter of :meth:`TaskMeter.totals` each answer source adds to.
SOURCE_COUNTS = {"replay": "replayed", "cache": "cache_hits", "live": "replay_live"}


class CallUnanswerable(ModelError):
    """A call nothing may answer (a replay miss): the attempt ends as a ``RUN_ERROR`` naming it, whatever its
    harness or agent made of the error. Neither retryable nor fatal: the other tasks go on."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=400)


def is_outage(exc: ModelError) -> bool:
    """A model error that is the provider's outage — no answer, a refused connection, 5xx, 429, timeouts or a
    malformed answer, past the client's own retries — not the run's configuration (a rejected key, an unknown
    model, a bad request: 4xx) nor a stopped run."""
    if isinstance(exc, RunStopped | LimitReached):
        return False
    return exc.retryable or (exc.fatal and (exc.status is None or exc.status >= 500))


class MeteredModel(ModelClient):
    """A model client that records every call into a :class:`TaskMeter`."""

    def __init__(self, inner: ModelClient, role: str, meter: TaskMeter, via: str = "client") -> None:
        self.inner = inner
        self.role = role
        self.meter = meter
        self.model = inner.model
        self.via = via
        self._redactor: Redactor | None = None

    def _keep(self, record: CallRecord) -> None:
        """Bound the record (masked before any cut) and add it to the meter."""
        if not self.meter.records_calls:
            return
        redactor = self.meter.redactor
        if redactor is None:  # a meter no gateway granted: this client's own secrets
            if self._redactor is None:
                self._redactor = Redactor()
                self._redactor.add(*getattr(self.inner, "secrets", ()))
            redactor = self._redactor
        record.bound(redactor if redactor.active else None)
        self.meter.calls.append(record)
        if self.meter.on_call is not None:
            self.meter.on_call(record)

    def begin(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None, *,
              protocol: str = "", endpoint: str = "", stream: bool = False, passthrough: bool = False,
              params: Mapping[str, Any] | None = None) -> MeteredCall:
        """Start recording one call (raises :class:`LimitReached` when a budget refuses it). ``params`` are
        the generation settings the call is made with (what its key holds)."""
        record = CallRecord(
            role=self.role, model=self.model, started_at=time.time(), latency_s=0.0, messages=list(messages),
            tools=[_tool_name(t) for t in tools or ()], response=None, via=self.via, protocol=protocol,
            endpoint=endpoint, stream=stream, passthrough=passthrough,
            request_key=request_key(messages, tools, params) if messages or tools or params else EMPTY_REQUEST_KEY,
            params=recorded_params(params), tool_digests=tool_digests(tools))
        call = MeteredCall(self, record)
        try:
            self.meter.check(self.role)
        except Exception as exc:
            call.fail(exc)
            raise
        return call

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        protocol: str = "",
        endpoint: str = "",
        **params: Any,
    ) -> ChatResponse:
        params = self._seeded(params)
        call = self.begin(messages, tools, protocol=protocol, endpoint=endpoint, params=params)
        try:
            response = await self.inner.chat(messages, tools=tools, **params)
        except BaseException as exc:
            call.fail(exc)  # a cancellation cuts the call (tokens counted so far)
            raise
        call.finish(response)
        return response

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        protocol: str = "",
        endpoint: str = "",
        **params: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """The inner client's stream, recorded: time to first token, budgets checked between pieces (a spent
        budget ends the stream with :class:`LimitReached`), the whole answer when it ends."""
        params = self._seeded(params)
        call = self.begin(messages, tools, protocol=protocol, endpoint=endpoint, stream=True, params=params)
        pieces = StreamAssembler()
        try:
            async with contextlib.aclosing(self.inner.stream(messages, tools=tools, **params)) as events:
                async for event in events:
                    if isinstance(event, StreamEnd):
                        call.finish(event.response)
                        yield event
                        return
                    call.first_piece()
                    pieces.add(event)
                    call.progress(pieces.chars)
                    yield event
            call.finish(pieces.finish(self.model))  # a stream without its end: what came, as the answer
        except GeneratorExit:
            call.cut("the caller stopped reading the stream (client disconnected)")
            raise
        except BaseException as exc:
            if getattr(exc, "fault", None) is not None:  # ``--faults`` cut the stream: what came before, kept
                call.record.response = pieces.message()
            call.fail(exc)
            raise

    def _seeded(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.meter.seed is not None and "seed" not in params and self.inner.accepts_seed:
            return {**params, "seed": self.meter.seed}
        return params


def _tool_name(tool: Mapping[str, Any]) -> str:
    kind = tool.get("type") or "function"
    return str((tool.get(kind) or tool.get("function") or tool).get("name", ""))


#: Characters of streamed output counted as one token when a stream is checked against a token budget.
CHARS_PER_TOKEN = 4


#: What reads a request's messages, tools and generation settings (see :meth:`MeteredCall.describe_later`).
RequestReader = Callable[[], tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]], Mapping[str, Any]]]


class MeteredCall:
    """One call being recorded: ``finish`` with the answer, or ``fail`` with the error."""

    def __init__(self, model: MeteredModel, record: CallRecord) -> None:
        self.model = model
        self.record = record
        self.t0 = time.perf_counter()
        self.done = False
        self._read_request: RequestReader | None = None
        #: Characters of the answer streamed so far (what a cut call's completion tokens are counted from).
        self.chars = 0
        self._measure: Callable[[], int] | None = None
        model.meter.open_calls.append(self)

    def measure_with(self, streamed_chars: Callable[[], int]) -> None:
        """Count the answer streamed so far with ``streamed_chars()`` when the call is cut (for a relay that
        reads the stream's events only later)."""
        self._measure = streamed_chars

    def _end(self) -> bool:
        """Mark the call ended; False when it had ended already."""
        if self.done:
            return False
        self.done = True
        with contextlib.suppress(ValueError):
            self.model.meter.open_calls.remove(self)
        return True

    def first_piece(self) -> None:
        if self.record.ttft_s is None:
            self.record.ttft_s = time.perf_counter() - self.t0

    def describe_later(self, read: RequestReader
                       ) -> None:
        """Read the request's messages, tools and settings (``read()``) only when the call ends, just before it is kept:
        for a call begun before they were read (a passed-through request, whose first token does not wait
        for its translation)."""
        self._read_request = read

    def _described(self) -> None:
        read, self._read_request = self._read_request, None
        if read is not None:
            messages, tools, params = read()
            record = self.record
            record.messages = list(messages)
            record.tools = [_tool_name(t) for t in tools or ()]
            record.request_key = request_key(messages, tools, params)
            record.params = recorded_params(params)
            record.tool_digests = tool_digests(tools)

    @property
    def counts_pieces(self) -> bool:
        """Whether :meth:`progress` needs the characters streamed so far (a task token budget applies)."""
        meter, role = self.model.meter, self.model.role
        return (meter.max_tokens is not None and role in BUDGETED_ROLES) or (
            meter.agent_max_tokens is not None and role == "agent")

    def progress(self, chars: int) -> None:
        """Check the budgets while a stream runs (the run's stop, and the task's tokens counting what has
        streamed so far at :data:`CHARS_PER_TOKEN` characters a token)."""
        self.chars = max(self.chars, chars)
        meter = self.model.meter
        if meter.budget is not None:
            meter.budget.check()
        if meter.max_tokens is not None and self.model.role in BUDGETED_ROLES:
            used = meter.tokens_used + chars // CHARS_PER_TOKEN
            if used >= meter.max_tokens:
                raise LimitReached(f"limit reached: max_tokens_per_task={meter.max_tokens} (used about {used}, "
                                   "in the middle of a streamed answer)", limit="max_tokens_per_task")
        if self.model.role == "agent":
            meter._check_agent(streamed_tokens=max(1, chars // CHARS_PER_TOKEN))

    def note(self, metadata: Mapping[str, Any] | None) -> None:
        """Take what the answer says of itself: its ``source`` (``replay``, ``cache``, ``live``) and the fault
        injected into it (``fault``)."""
        fault = (metadata or {}).get("fault")
        if isinstance(fault, Mapping):
            self.record.fault = dict(fault)
        source = (metadata or {}).get("source")
        if isinstance(source, str) and source in SOURCE_COUNTS:
            self.record.source = source

    def fail(self, exc: BaseException) -> None:
        if not isinstance(exc, Exception):  # cancelled (a timeout, an interrupt): the call is cut, not failed
            self.cut(f"cancelled ({type(exc).__name__})")
            return
        if not self._end():
            return
        self._described()
        meter, record = self.model.meter, self.record
        record.latency_s = time.perf_counter() - self.t0
        record.error = str(exc) if isinstance(exc, ModelError) else describe(exc) if isinstance(
            exc, Exception) else f"cancelled ({type(exc).__name__})"
        injected = getattr(exc, "fault", None)
        if injected is not None and hasattr(injected, "record"):  # ``--faults``: the agent's to ride out
            record.fault = injected.record()
            record.attempts = 1
        elif isinstance(exc, CallUnanswerable):
            meter.unanswerable = meter.unanswerable or str(exc)
        elif isinstance(exc, LimitReached):
            meter.limit_reached = meter.limit_reached or str(exc)
        elif isinstance(exc, ModelError):
            record.attempts = int(getattr(exc, "attempts", 1) or 1)
            if is_outage(exc):
                meter.outage_error = meter.outage_error or str(exc)  # the runner retries or stops the run
                if meter.budget is not None and meter.budget.retries == 0:  # nothing to retry: stop at once
                    meter.budget.stop(f"model provider outage: {exc}")
            elif exc.fatal:
                meter.fatal_error = meter.fatal_error or str(exc)
                if meter.budget is not None:
                    meter.budget.stop(str(exc))
        self.model._keep(record)

    def cut(self, why: str) -> None:
        """End the call before its answer did: recorded with ``why`` and the tokens counted so far (the
        request's and the answer's streamed characters, :data:`CHARS_PER_TOKEN` a token), billed as such."""
        if self.done:
            return
        streamed = self.chars
        if self._measure is not None:
            with contextlib.suppress(Exception):
                streamed = max(streamed, self._measure())
        if not self._end():
            return
        with contextlib.suppress(Exception):
            self._described()
        record = self.record
        record.latency_s = time.perf_counter() - self.t0
        record.error = record.cut = why
        record.prompt_tokens = max(1, _size(record.messages) // CHARS_PER_TOKEN) if record.messages else 0
        record.completion_tokens = streamed // CHARS_PER_TOKEN
        self._bill(record.prompt_tokens, record.completion_tokens)
        self.model._keep(record)

    def _bill(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Count the call's tokens against the task's budget and its cost against the run's."""
        meter, record, role = self.model.meter, self.record, self.model.role
        if role in BUDGETED_ROLES:
            meter.tokens_used += prompt_tokens + completion_tokens
        if role == "agent":
            meter.agent_tokens += prompt_tokens + completion_tokens
        price = meter.prices.get(role)
        if price is not None and record.source == "cache":  # paid for by the run that stored it
            record.saved_cost_usd = price.cost(prompt_tokens, completion_tokens)
            record.cost_usd = 0.0
        elif price is not None:
            record.cost_usd = price.cost(prompt_tokens, completion_tokens)
            if meter.budget is not None:
                meter.budget.add_cost(record.cost_usd)

    def finish(self, response: ChatResponse) -> None:
        if not self._end():
            return
        self._described()
        record = self.record
        record.latency_s = time.perf_counter() - self.t0
        if self.record.stream and record.ttft_s is None:
            record.ttft_s = record.latency_s
        self.note(response.metadata)
        usage = response.usage
        record.response = dict(response.message)
        record.prompt_tokens = usage.prompt_tokens
        record.completion_tokens = usage.completion_tokens
        record.cached_tokens = usage.cached_tokens
        record.reasoning_tokens = usage.reasoning_tokens
        record.finish_reason = response.finish_reason
        record.attempts = int((response.metadata or {}).get("attempts", 1))
        self._bill(usage.prompt_tokens, usage.completion_tokens)
        self.model._keep(record)
