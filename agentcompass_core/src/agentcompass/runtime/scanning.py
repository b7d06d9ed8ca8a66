"""Scanners: what reads an attempt's transcript after the fact and flags what a score alone hides (the agent read
the tests, the network was down, the model refused, the agent looped).

A scanner is any object with a ``name`` and a ``scan(transcript)`` method (:class:`Scanner`) returning the
:class:`Finding` objects it makes of one attempt — or an awaitable of them, for a scanner that asks a model.
The built-in ones (``reward-hacking``, ``environment``, ``refusal``, ``gave-up``, ``loop``, ``judge:RUBRIC``)
follow the same contract as a plugin's, registered through the ``agentcompass_scanners`` hook::

    from agentcompass import hookimpl
    from agentcompass.runtime.scanning import Finding, Transcript

    class SudoScanner:
        name = "sudo"

        def scan(self, transcript: Transcript) -> list[Finding]:
            return [transcript.finding(self.name, "low", "the agent used sudo", step.evidence())
                    for step in transcript.steps if "sudo " in step.text]

    @hookimpl
    def agentcompass_scanners(register):
        register("sudo", SudoScanner)

A :class:`Transcript` is one attempt as the run directory holds it: its final record (status, metrics, error,
final answer, artifacts' summary), its model calls (``trajectories.jsonl`` lines) and its tool calls normalised
into :class:`ToolStep` objects (name, arguments, the command a shell tool ran, the output that came back) — the
same reading of the conversation the ATIF export makes. Findings never change a score by themselves; the engine
writes them to ``scans.jsonl`` masked of the run's secrets (``agentcompass scan``, ``run --scan``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["EXCERPT_CHARS", "SCANS", "SEVERITIES", "Evidence", "Finding", "Scanner", "Severity", "ToolStep",
           "Transcript", "excerpt", "finding_from_json", "read_findings", "steps_of"]

#: The run-directory file findings are written to, one JSON line per finding.
SCANS = "scans.jsonl"

#: How severe a finding is, least first.
Severity = Literal["low", "medium", "high"]
SEVERITIES: tuple[Severity, ...] = ("low", "medium", "high")
#: The longest excerpt a finding's evidence keeps (characters).
EXCERPT_CHARS = 300


def excerpt(text: str, around: int | None = None, width: int = EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to ``width`` characters (around position ``around`` when given)."""
    flat = " ".join(str(text).split())
    if len(flat) <= width:
        return flat
    if around is None:
        return flat[: width - 1] + "…"
    # ``around`` indexes the original text: find roughly the same place in the flattened one.
    ratio = around / max(len(text), 1)
    centre = int(ratio * len(flat))
    start = max(0, min(centre - width // 3, len(flat) - width + 1))
    return ("…" if start else "") + flat[start:start + width - 2] + "…"


@dataclass(frozen=True)
class Evidence:
    """What a finding points at.

    :param where: ``"step"`` (a tool call: ``index`` counts the attempt's tool calls from 0), ``"call"`` (a model
        call: ``index`` is its ``trajectories.jsonl`` index), ``"result"`` (the attempt's record: its error, status)
        or ``"artifact"`` (a collected file: ``path`` names it).
    :param index: the step's or call's index (``None`` for a result or an artifact).
    :param excerpt: the telling text, one line, at most :data:`EXCERPT_CHARS` characters.
    :param path: the artifact's path under the attempt's artifact directory (``where == "artifact"``).
    """

    where: Literal["step", "call", "result", "artifact"]
    excerpt: str
    index: int | None = None
    path: str | None = None


@dataclass(frozen=True)
class Finding:
    """One flag a scanner raised on one attempt: a line of ``scans.jsonl``.

    :param scanner: the scanner's name (``reward-hacking``, ``judge:rubric.md``, a plugin's).
    :param task_id:, :param trial:, :param attempt: the attempt.
    :param severity: ``low``, ``medium`` or ``high``.
    :param reason: one line saying what was seen.
    :param evidence: where (the step or call index) and an excerpt.
    """

    scanner: str
    task_id: str
    trial: int
    attempt: int
    severity: Severity
    reason: str
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
class ToolStep:
    """One tool call of the agent, with what came back.

    :param index: its place among the attempt's tool calls, from 0.
    :param call_index: the model call (``trajectories.jsonl`` ``index``) that asked for it.
    :param name: the tool's name (``bash``, ``write_file``, ...).
    :param arguments: its arguments, as an object.
    :param output: the tool's result the next prompt brought back (``None`` when none came back).
    """

    index: int
    call_index: int
    name: str
    arguments: Mapping[str, Any]
    output: str | None = None

    @property
    def command(self) -> str | None:
        """The shell command, for a tool that runs one (an argument ``command``, ``cmd`` or ``script``)."""
        for key in ("command", "cmd", "script"):
            value = self.arguments.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return " ".join(value)
        return None

    @property
    def text(self) -> str:
        """The call as one text: the command, else the tool's name and its arguments as JSON."""
        command = self.command
        if command is not None:
            return command
        return f"{self.name} {json.dumps(self.arguments, ensure_ascii=False, default=str)}"

    def evidence(self, text: str | None = None, at: int | None = None) -> Evidence:
        """Evidence pointing at this step: an excerpt of ``text`` (default: the call's :attr:`text`)."""
        source = self.text if text is None else text
        return Evidence("step", excerpt(source, at), self.index)


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)
    return json.dumps(content, ensure_ascii=False, default=str)


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str) and raw:
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return {"arguments": raw}
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    return {}


def steps_of(calls: Sequence[Mapping[str, Any]]) -> tuple[ToolStep, ...]:
    """The tool calls the model's replies made, in order, each with the result a later prompt brought back
    (matched by the call's id) — read as the ATIF export reads a conversation (OpenAI chat form)."""
    asked: list[tuple[str, int, str, dict[str, Any]]] = []
    outputs: dict[str, str] = {}
    for call in calls:
        for m in call.get("messages") or ():
            if isinstance(m, Mapping) and m.get("role") == "tool":
                outputs.setdefault(str(m.get("tool_call_id") or ""), _text_of(m.get("content")))
        reply = call.get("response")
        if not isinstance(reply, Mapping):
            continue
        for i, tc in enumerate(reply.get("tool_calls") or ()):
            if not isinstance(tc, Mapping):
                continue
            fn = tc["function"] if isinstance(tc.get("function"), Mapping) else tc
            call_id = str(tc.get("id") or f"call_{len(asked)}_{i}")
            asked.append((call_id, int(call.get("index") or 0), str(fn.get("name") or ""),
                          _arguments(fn.get("arguments", fn.get("input")))))
    return tuple(ToolStep(n, index, name, args, outputs.get(call_id))
                 for n, (call_id, index, name, args) in enumerate(asked))


@dataclass(frozen=True)
class Transcript:
    """One attempt, as a scanner reads it.

    :param run_id:, :param benchmark:, :param harness: the run.
    :param task_id:, :param trial:, :param attempt: the attempt.
    :param status: its status name (``COMPLETED``, ``RUN_ERROR``, ``LIMIT_REACHED``, ...).
    :param metrics:, :param error:, :param error_phase:, :param final_answer:, :param category: its record's.
    :param artifacts: the record's ``artifacts`` (what the harness and the verifier reported).
    :param calls: the attempt's model calls (``trajectories.jsonl`` lines, every role), in order. Read from a run
        directory, only the last call of each role keeps its ``messages`` (the whole conversation: each call's
        prompt repeats the ones before it); the others have none.
    :param steps: the agent's tool calls (:func:`steps_of` of the calls, plus those read from an installed
        agent's own trajectory among the artifacts).
    :param artifacts_dir: the attempt's artifact directory, when it has one.
    :param passed: whether the attempt passed by the run's verdict rule (its metric contract's success metric at
        its threshold, as the summary's verdicts count it); ``None`` when the run recorded no contract.
    """

    run_id: str
    task_id: str
    trial: int
    attempt: int
    status: str
    benchmark: str = ""
    harness: str = ""
    metrics: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    error_phase: str | None = None
    final_answer: str | None = None
    category: str | None = None
    artifacts: Mapping[str, Any] = field(default_factory=dict)
    calls: tuple[Mapping[str, Any], ...] = ()
    steps: tuple[ToolStep, ...] = ()
    artifacts_dir: str | None = None
    passed: bool | None = None

    def finding(self, scanner: str, severity: Severity, reason: str, *evidence: Evidence) -> Finding:
        """A :class:`Finding` of this attempt."""
        return Finding(scanner, self.task_id, self.trial, self.attempt, severity, reason, tuple(evidence))

    def replies(self) -> Iterator[tuple[int, str]]:
        """``(call index, text)`` of each model reply of the ``agent`` role (or of every role when none is)."""
        roles = {c.get("role") for c in self.calls}
        for call in self.calls:
            if "agent" in roles and call.get("role") != "agent":
                continue
            reply = call.get("response")
            if isinstance(reply, Mapping):
                text = _text_of(reply.get("content"))
                if text:
                    yield int(call.get("index") or 0), text

    def artifact_texts(self, max_bytes: int = 65536) -> Iterator[tuple[str, str]]:
        """``(relative path, text)`` of each collected file (its first ``max_bytes``), in path order."""
        if not self.artifacts_dir:
            return
        root = Path(self.artifacts_dir)
        if not root.is_dir():
            return
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            try:
                with open(path, "rb") as f:
                    raw = f.read(max_bytes)
            except OSError:
                continue
            if b"\0" in raw[:1024]:
                continue
            yield str(path.relative_to(root)), raw.decode("utf-8", "replace")


@runtime_checkable
class Scanner(Protocol):
    """What a scanner is: a ``name`` (what ``scans.jsonl`` calls it) and ``scan``, the findings of one attempt
    (an iterable, or an awaitable of one). ``scan`` must not change the run directory."""

    name: str

    def scan(self, transcript: Transcript) -> Iterable[Finding] | Awaitable[Iterable[Finding]]: ...


def finding_from_json(data: Mapping[str, Any]) -> Finding | None:
    """A ``scans.jsonl`` line's object as a :class:`Finding` (``None`` when it names no scanner or task)."""
    if not isinstance(data.get("scanner"), str) or not isinstance(data.get("task_id"), str):
        return None
    evidence = tuple(Evidence(e["where"] if e.get("where") in ("step", "call", "result", "artifact") else "result",
                              str(e.get("excerpt", "")), e.get("index") if isinstance(e.get("index"), int) else None,
                              e.get("path") if isinstance(e.get("path"), str) else None)
                     for e in data.get("evidence") or () if isinstance(e, Mapping))
    severity: Severity = next((s for s in SEVERITIES if s == data.get("severity")), "low")
    trial, attempt = data.get("trial"), data.get("attempt")
    return Finding(data["scanner"], data["task_id"], trial if isinstance(trial, int) else 1,
                   attempt if isinstance(attempt, int) else 1, severity, str(data.get("reason", "")), evidence)


def read_findings(run_dir: Path) -> tuple[Finding, ...]:
    """The findings of a run directory's ``scans.jsonl``, in order (none when it was not scanned; a damaged or
    torn line is passed over)."""
    path = Path(run_dir) / SCANS
    if not path.exists():
        return ()
    out: list[Finding] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            finding = finding_from_json(data) if isinstance(data, dict) else None
            if finding is not None:
                out.append(finding)
    return tuple(out)
