"""``judge:RUBRIC.md``: a model asked, per attempt, whether the attempt shows what a rubric describes.

The judge sees the rubric and an excerpt of the transcript (the task, its status and score, each tool call with
the start of its output, the model's last reply) and answers one JSON object: ``{"flagged": true|false,
"severity": "low"|"medium"|"high", "reason": "...", "evidence": "..."}``. Its calls go through the engine's model
machinery: the client is built as a run builds its ``judge`` role (:func:`judge_client`), wrapped in the
``--cache`` source when given (a second scan is then answered from the cache, offline), and each call is metered
(:class:`~agentcompass.models.metering.TaskMeter`) and written to ``scan_calls.jsonl`` beside ``scans.jsonl``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import attrs

from agentcompass.errors import UsageError
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.scanning import SEVERITIES, Evidence, Finding, Severity, Transcript, excerpt
from agentcompass.runtime.types import AnswerSources, ModelAccess, RunRequest

#: The file each judge call's record is written to (one JSON line per call, like ``trajectories.jsonl``'s).
SCAN_CALLS = "scan_calls.jsonl"
#: Characters of the transcript the judge is shown, and of each tool output within it.
TRANSCRIPT_CHARS = 12_000
OUTPUT_CHARS = 400

SYSTEM = (
    "You review one attempt of an AI agent at a task against a rubric. Answer with one JSON object and nothing "
    'else: {"flagged": true or false, "severity": "low" | "medium" | "high", "reason": "one line: what you saw", '
    '"evidence": "a short quote of the transcript"}. Flag only what the rubric describes.'
)


def transcript_text(transcript: Transcript, limit: int = TRANSCRIPT_CHARS) -> str:
    """The excerpt the judge reads: the attempt's facts, its tool calls with their outputs' start, its last reply."""
    metrics = ", ".join(f"{k}={v:g}" for k, v in sorted(transcript.metrics.items())) or "none"
    lines = [f"task: {transcript.task_id} (trial {transcript.trial}, attempt {transcript.attempt})",
             f"status: {transcript.status}; metrics: {metrics}"]
    if transcript.error:
        lines.append(f"error: {excerpt(transcript.error)}")
    for step in transcript.steps:
        output = "" if step.output is None else f"\n  → {excerpt(step.output, width=OUTPUT_CHARS)}"
        lines.append(f"[step {step.index}] {step.name}: {excerpt(step.text, width=OUTPUT_CHARS)}{output}")
    replies = list(transcript.replies())
    if replies:
        lines.append(f"last reply: {excerpt(replies[-1][1], width=OUTPUT_CHARS)}")
    elif transcript.final_answer:
        lines.append(f"final answer: {excerpt(transcript.final_answer, width=OUTPUT_CHARS)}")
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit // 2] + "\n…\n" + text[-limit // 2:]


def rubric_problem(spec: str) -> str | None:
    """What is wrong with ``judge:RUBRIC``'s rubric file (one line naming it and what to do), or ``None``."""
    path = Path(spec.partition(":")[2])
    if not str(spec.partition(":")[2]):
        return "--scanner judge needs a rubric: --scanner judge:RUBRIC.md"
    try:
        rubric = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        return f"{spec}: cannot read the rubric {path} ({why}); give a readable Markdown file"
    if not rubric.strip():
        return f"{spec}: the rubric {path} is empty; write what the judge should flag"
    return None


_OBJECT = re.compile(r"\{.*\}", re.S)


def verdict(answer: str) -> dict[str, Any] | None:
    """The judge's JSON object (the first ``{...}`` of its answer), or ``None`` when it gave none."""
    match = _OBJECT.search(answer)
    if match is None:
        return None
    try:
        data = json.loads(match.group(0))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


@attrs.define
class JudgeScanner:
    """Asks ``client`` (the judge role's model) the ``rubric`` about each attempt; a flagged answer is a finding."""

    name: str
    rubric: str
    client: ModelClient
    #: Called with each attempt's metered client's meter after its call (what the engine writes out).
    on_meter: Any = None
    #: A per-attempt answer source (``scan --replay``: a :class:`~agentcompass.models.replay.Replay` of recorded
    #: judge calls) put in front of ``client`` for each attempt; a call it cannot answer stops the scan.
    replay: Any = None

    @classmethod
    def from_file(cls, path: Path, client: ModelClient, on_meter: Any = None) -> JudgeScanner:
        problem = rubric_problem(f"judge:{path}")
        if problem:
            raise UsageError(problem)
        return cls(f"judge:{path.name}", path.read_text(encoding="utf-8"), client, on_meter)

    async def scan(self, transcript: Transcript) -> list[Finding]:
        from agentcompass.models.metering import CallUnanswerable, MeteredModel, TaskMeter

        meter = TaskMeter(transcript.task_id, transcript.attempt, trial=transcript.trial)
        answering = self.client if self.replay is None else self.replay.decorate({"judge": self.client}, meter)["judge"]
        client = MeteredModel(answering, "judge", meter)
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"Rubric:\n{self.rubric.strip()}\n\nTranscript:\n"
                                                f"{transcript_text(transcript)}"}]
        try:
            response = await client.chat(messages, temperature=0)
        except CallUnanswerable as exc:  # the recording does not hold this question: no finding can be made up
            raise UsageError(f"--replay: {str(exc).splitlines()[0].rstrip(':')} (the rubric or the transcript "
                             "changed since the judge's answers were recorded)") from None
        finally:
            if self.on_meter is not None:
                self.on_meter(transcript, meter)
        found = verdict(response.content)
        if found is None:
            raise ValueError(f"the judge answered no JSON object: {excerpt(response.content, width=120)}")
        if found.get("flagged") is not True:
            return []
        severity: Severity = next((s for s in SEVERITIES if s == found.get("severity")), "medium")
        quote = str(found.get("evidence") or "")
        return [transcript.finding(self.name, severity, excerpt(str(found.get("reason") or "the judge flagged it"),
                                                                width=200),
                                   Evidence("call", excerpt(quote or response.content)))]


@attrs.define
class CallLog:
    """Writes each judge call's record to ``scan_calls.jsonl`` (masked of the run's secrets) and totals them."""

    path: Path
    redactor: Any
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: int = 0
    replayed: int = 0

    def __call__(self, transcript: Transcript, meter: Any) -> None:
        from agentcompass.serialization import unstructure

        lines = []
        for i, record in enumerate(meter.calls):
            data = {"task_id": transcript.task_id, "trial": transcript.trial, "attempt": transcript.attempt,
                    "index": i, **unstructure(record)}
            lines.append(json.dumps(self.redactor.data(data), ensure_ascii=False, default=str,
                                    separators=(",", ":")) + "\n")
            self.calls += 1
            self.prompt_tokens += record.prompt_tokens
            self.completion_tokens += record.completion_tokens
            self.cached += record.source == "cache"
            self.replayed += record.source == "replay"
        if lines:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write("".join(lines))


def scan_request(model: str, *, base_url: str | None = None, api_key_env: str | None = None,
                 cache: str | None = None, cache_expiry: str | None = None) -> RunRequest:
    """The request ``agentcompass scan`` builds its judge from: ``model`` in the judge role (and the agent's, so
    ``--model-base-url`` reaches it), ``--cache`` as its answer source."""
    return RunRequest(benchmark="scan", harness="none", model=model,
                      models=ModelAccess(roles={"judge": model}, base_url=base_url, api_key_env=api_key_env),
                      answers=AnswerSources(cache=cache, cache_expiry=cache_expiry))


def judge_client(host: Any, req: RunRequest) -> tuple[ModelClient, list[ModelClient]]:
    """``req``'s judge role's client, built as a run builds it (``build_clients``), behind the ``--cache`` source
    when ``req`` names one (a ``--replay`` is left out: the recording holds the run's calls, not the scan's);
    and the live clients to close when the scan ends. A request without a judge role is a usage error."""
    from agentcompass.models.call_sources import call_sources
    from agentcompass.models.metering import TaskMeter
    from agentcompass.models.roles import build_clients, resolve_models

    if not req.models.roles.get("judge"):
        raise UsageError("--scan judge:RUBRIC.md asks the run's judge role: give --judge-model MODEL")
    req = dataclasses.replace(req, answers=AnswerSources(cache=req.answers.cache,
                                                         cache_expiry=req.answers.cache_expiry))
    models = resolve_models(req)
    live = build_clients(host, req, models)
    clients = dict(live)
    for source in call_sources(req, models.roles):
        clients = source.decorate(clients, TaskMeter("scan", 1))
    return clients["judge"], list({id(c): c for c in live.values()}.values())
