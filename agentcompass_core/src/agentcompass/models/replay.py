"""``run --replay RUN_DIR``: every model call answered from a recorded run instead of the live model.

Each (task, trial) answers from the calls its final attempt recorded in ``RUN_DIR/trajectories.jsonl``, role
by role, in order: a call is matched on its canonical key (:mod:`agentcompass.models.call_key` — messages,
tools and settings; not the model's name, tool-call ids, temporary paths or tokens) to the first recorded call
of its role not yet used with that key. Translated calls (``chat``, ``stream``) and passthrough ones
(``native``: an installed agent's Anthropic Messages or Responses request, streamed or not) alike: a stream is
synthesized from the recorded answer, in the request's protocol. Answers come at once unless ``latency`` asks
for each call's recorded latency.

A call that matches nothing is a *miss*. With ``miss="error"`` (the default) it fails with
:class:`~agentcompass.models.metering.CallUnanswerable`, naming the task, the call's index and where it first
differs from the recorded call expected next (a short diff): the attempt ends ``RUN_ERROR`` with that message.
With ``miss="live"`` it goes to the live model and its record says ``"source": "live"``; replayed calls say
``"source": "replay"``.

The seam: :class:`Replay` is a :class:`~agentcompass.models.access.CallSource`, installed by
:mod:`agentcompass.models.call_sources`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from agentcompass.errors import ResultsError, UsageError
from agentcompass.models.call_key import first_difference, normalise, request_key, tool_digests
from agentcompass.models.fault_profiles import REPLACING_KINDS
from agentcompass.models.metering import CallUnanswerable, TaskMeter
from agentcompass.models.stored_answers import (
    CUT_NOTE,
    count_tokens_reply,
    is_count,
    marked,
    native_reply,
    parse_native,
    response_from,
)
from agentcompass.protocols import ProtocolError
from agentcompass.results.reader import RunReader
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.model_stream import NativeReply, NativeRequest, StreamEnd, StreamEvent, events_of
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError

MISS_MODES = ("error", "live")
#: The recording last opened, by its path and the sizes and times of its files.
_OPENED: dict[tuple[str, object], Recording] = {}


@attrs.define
class Recording:
    """A recorded run's model calls: those of each (task, trial)'s final attempt, by role, in order."""

    path: Path
    run_id: str
    seed: int | None
    _reader: RunReader

    @classmethod
    def open(cls, path: Path) -> Recording:
        """The run directory ``path``; a :class:`UsageError` naming what is wrong when it cannot be replayed.
        Opened once per state of its files (the checks, the seed, run.json and the run all ask for it)."""
        try:
            stamp = tuple((f.stat().st_size, f.stat().st_mtime_ns) if f.exists() else None
                          for f in (path / "run.json", path / "results.jsonl", path / "trajectories.jsonl"))
        except OSError:
            stamp = None
        key = (str(path.resolve()), stamp)
        if stamp is not None and key in _OPENED:
            return _OPENED[key]
        recording = cls._read(path)
        if stamp is not None:
            _OPENED.clear()  # one recording at a time is what a run needs
            _OPENED[key] = recording
        return recording

    @classmethod
    def _read(cls, path: Path) -> Recording:
        try:
            reader = RunReader.open(path)
        except ResultsError as exc:
            raise UsageError(f"--replay {path}: {exc}") from None
        if not reader.results:
            raise UsageError(f"--replay {path}: the run has no finished task to replay")
        seed = (reader.info.get("request") or {}).get("seed")
        return cls(path.resolve(), reader.run_id, seed if isinstance(seed, int) else None, reader)

    def role_facts(self, role: str) -> tuple[frozenset[str], bool]:
        """What the recorded run's client for ``role`` was: the protocols it passed calls through in (it spoke
        them), and whether it took the (task, trial)'s seed (its calls carry one)."""
        protocols: set[str] = set()
        seeded = False
        for key, final in self._reader.results.items():
            for call in self._reader.trajectory(key):
                if call.get("role") != role or call.get("attempt") != final.get("attempt", 1):
                    continue
                if call.get("passthrough"):
                    protocols.add(str(call.get("protocol")))
                seeded = seeded or "seed" in (call.get("params") or {})
        return frozenset(protocols), seeded

    def calls(self, task_id: str, trial: int) -> dict[str, list[dict[str, Any]]]:
        """The recorded calls of (task, trial)'s final attempt, by role (empty when it has none)."""
        final = self._reader.results.get((task_id, trial))
        if final is None:
            return {}
        attempt = final.get("attempt", 1)
        out: dict[str, list[dict[str, Any]]] = {}
        for call in self._reader.trajectory((task_id, trial)):
            if call.get("attempt", 1) == attempt:
                out.setdefault(str(call.get("role") or "agent"), []).append(call)
        return out


class CallRecording(Protocol):
    """What a replay answers from: recorded calls by (task, trial) and role (a run's :class:`Recording`, or the
    judge calls a scan recorded)."""

    path: Path
    run_id: str

    def calls(self, task_id: str, trial: int) -> dict[str, list[dict[str, Any]]]: ...


@attrs.define
class Replay:
    """The :class:`~agentcompass.models.access.CallSource` of ``--replay``."""

    recording: CallRecording
    miss: str = "error"
    latency: bool = False

    def decorate(self, clients: Mapping[str, ModelClient], meter: TaskMeter) -> dict[str, ModelClient]:
        attempt = ReplayedAttempt(self, meter.task_id, meter.trial, self.recording.calls(meter.task_id, meter.trial))
        return {role: ReplayClient(client, role, attempt) for role, client in clients.items()}

    def provenance(self) -> dict[str, object]:
        return {"replay": {"run_dir": str(self.recording.path), "run_id": self.recording.run_id,
                           "miss": self.miss, "latency": self.latency}}

    def warnings(self) -> list[str]:
        return []  # a miss is reported where it happens (the attempt's error, or ``replay.miss`` in the log)


@attrs.define
class ReplayedAttempt:
    """The recorded calls one attempt answers from, and which of them it used."""

    replay: Replay
    task_id: str
    trial: int
    calls: dict[str, list[dict[str, Any]]]
    used: dict[str, set[int]] = attrs.field(factory=dict)
    made: dict[str, int] = attrs.field(factory=dict)

    def answer(self, role: str, messages: Sequence[Any], tools: Sequence[Any] | None,
               params: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The recorded call answering this one, or ``None`` (a miss to send live); raises on a miss otherwise."""
        index = self.made[role] = self.made.get(role, 0) + 1
        recorded = self.calls.get(role, [])
        used = self.used.setdefault(role, set())
        key = request_key(messages, tools, params)
        for i, call in enumerate(recorded):
            if i not in used and call.get("request_key") == key and not replaced_by_fault(call):
                used.add(i)
                return call
        why = self._miss(role, recorded, used, messages, tools, params)
        where = (f"task {self.task_id!r} (trial {self.trial}), {role} call {index}: "
                 f"not in the recording {self.replay.recording.path}")
        get_logger(component="replay").warning("replay.miss", task_id=self.task_id, trial=self.trial, role=role,
                                               index=index, live=self.replay.miss == "live", detail=why)
        if self.replay.miss == "live":
            return None
        raise CallUnanswerable(f"replay miss: {where}; {why}")

    def _miss(self, role: str, recorded: list[dict[str, Any]], used: set[int], messages: Sequence[Any],
              tools: Sequence[Any] | None, params: Mapping[str, Any] | None) -> str:
        left = [i for i in range(len(recorded)) if i not in used]
        if not left:
            return (f"the recorded attempt made {len(recorded)} {role} call(s) and all are used" if recorded else
                    f"the recorded attempt made no {role} call")
        expected = recorded[left[0]]
        if not expected.get("request_key"):
            return "the recording predates request keys (recorded by an older agentcompass): record it again"
        now = normalise(messages, (), params)
        now["tools"] = _named(_tool_names(tools), tool_digests(tools))
        then = normalise(expected.get("messages") or [], (), expected.get("params") or {})
        then["tools"] = _named(expected.get("tools") or [], expected.get("tool_digests") or [])
        return f"first difference from recorded {role} call {left[0] + 1}: " + first_difference(then, now)


def replaced_by_fault(call: Mapping[str, Any]) -> bool:
    """A recorded call whose answer a ``--faults`` fault replaced (it never reached the model): a replay of the
    faulted run injects the same fault before the call reaches the recording, so it answers nothing."""
    fault = call.get("fault")
    return isinstance(fault, Mapping) and fault.get("kind") in REPLACING_KINDS


def _tool_names(tools: Sequence[Any] | None) -> list[str]:
    names = []
    for tool in tools or ():
        kind = tool.get("type") or "function"
        names.append(str((tool.get(kind) or tool.get("function") or tool).get("name", "")))
    return names


def _named(names: Sequence[str], digests: Sequence[str]) -> list[dict[str, str]]:
    return [{"name": n, "schema": d} for n, d in zip(names, digests, strict=False)]


class OfflineModel(ModelClient):
    """A role's model that a replay never asks: it could not be built here (``why``: no key, no address)."""

    def __init__(self, model: str, native_protocols: frozenset[str], accepts_seed: bool, why: str) -> None:
        self.model = model
        self.native_protocols = native_protocols
        self.accepts_seed = accepts_seed
        self.why = why

    def _refuse(self) -> ModelError:
        return ModelError(f"no live model in this replay ({self.why})", status=400)

    async def chat(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                   **params: Any) -> ChatResponse:
        raise self._refuse()

    async def native(self, request: NativeRequest) -> NativeReply:
        raise self._refuse()


class ReplayClient(ModelClient):
    """One role's client for one attempt: answers from the recording, the live client behind it."""

    def __init__(self, live: ModelClient, role: str, attempt: ReplayedAttempt) -> None:
        self.live = live
        self.role = role
        self.attempt = attempt
        self.model = live.model
        self.secrets = tuple(getattr(live, "secrets", ()))
        self.accepts_seed = live.accepts_seed
        self.native_protocols = live.native_protocols

    async def _recorded(self, call: dict[str, Any]) -> ChatResponse:
        if self.attempt.replay.latency:
            await asyncio.sleep(float(call.get("latency_s") or 0.0))
        if (call.get("fault") or {}).get("kind") == "stream_cut" and call.get("response") is not None:
            return response_from(call, "replay")  # what streamed before the cut (--faults cuts it again)
        if call.get("error") is not None or call.get("response") is None:
            raise ModelError(f"{call.get('error') or 'no answer'} (replayed)")
        if call.get("truncated") and CUT_NOTE in json.dumps(call.get("response"), ensure_ascii=False):
            raise CallUnanswerable(
                f"replay: task {self.attempt.task_id!r} (trial {self.attempt.trial}), {self.role} call "
                f"{call.get('index', 0) + 1}: its answer was cut in the trajectory (over 256 KiB), so it cannot be "
                "replayed")
        return response_from(call, "replay")

    async def chat(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                   **params: Any) -> ChatResponse:
        call = self.attempt.answer(self.role, messages, tools, params)
        if call is None:
            return marked(await self.live.chat(messages, tools=tools, **params), "live")
        return await self._recorded(call)

    async def stream(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                     **params: Any) -> AsyncGenerator[StreamEvent, None]:
        call = self.attempt.answer(self.role, messages, tools, params)
        if call is None:
            async for event in self.live.stream(messages, tools=tools, **params):
                yield StreamEnd(marked(event.response, "live")) if isinstance(event, StreamEnd) else event
            return
        for event in events_of(await self._recorded(call)):
            yield event

    async def native(self, request: NativeRequest) -> NativeReply:
        if is_count(request):
            return count_tokens_reply(request)
        try:
            canonical = parse_native(request)
        except (KeyError, ProtocolError) as exc:
            raise ModelError(f"replay cannot read this {request.protocol!r} request: {exc}", status=400) from None
        call = self.attempt.answer(self.role, canonical.messages, canonical.tools, canonical.params)
        if call is None:
            reply = await self.live.native(request)
            reply.metadata = {**reply.metadata, "source": "live"}
            return reply
        return native_reply(await self._recorded(call), request, self.model, "replay")

    async def aclose(self) -> None:
        """Nothing: the live client is the run's, closed when the run ends."""
