"""A run directory's attempts as :class:`~agentcompass.runtime.scanning.Transcript` objects: each final result
with its attempt's model calls, its tool calls (from the conversation, and from an installed agent's own
trajectory among the artifacts) and its artifact directory.

Each call line repeats the conversation so far, so a long attempt's lines hold its prompt many times over: only
the last call of each role is parsed whole (its messages carry every tool output); the others are parsed
without their ``messages`` (:func:`call_without_messages`), and attempts are read one at a time."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from agentcompass.errors import ResultsError, describe
from agentcompass.results.lines import ARTIFACTS, TRAJECTORIES
from agentcompass.results.reader import Key, RunReader
from agentcompass.runtime.metrics import contract_from_json, verdict_rule
from agentcompass.runtime.names import safe_name
from agentcompass.runtime.scanning import ToolStep, Transcript, steps_of

#: File names of installed agents' own trajectories among the artifacts (mini-swe-agent, Claude Code, ...).
NATIVE_TRAJECTORIES = ("trajectory.json", "agent.traj.json", "mini-swe-agent.traj.json")


def artifacts_dir(run_dir: Path, task_id: str, trial: int, attempt: int) -> Path:
    task_dir = run_dir / ARTIFACTS / safe_name(task_id)
    return (task_dir if trial == 1 else task_dir / f"trial-{trial}") / f"attempt-{attempt}"


def native_steps(root: Path, start: int) -> tuple[ToolStep, ...]:
    """Tool calls an installed agent recorded itself: an ATIF trajectory's steps' ``tool_calls`` (with their
    observations), or a mini-swe-agent ``messages`` list (its ``bash`` blocks)."""
    if not root.is_dir():
        return ()
    steps: list[ToolStep] = []
    for path in sorted(p for p in root.rglob("*") if p.name in NATIVE_TRAJECTORIES or p.name.endswith(".traj.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, ValueError):
            continue
        if isinstance(data, Mapping) and isinstance(data.get("steps"), list):  # ATIF
            for s in data["steps"]:
                if not isinstance(s, Mapping):
                    continue
                results = [r.get("content") for r in (s.get("observation") or {}).get("results") or ()
                           if isinstance(r, Mapping)]
                for tc in s.get("tool_calls") or ():
                    if isinstance(tc, Mapping):
                        raw = tc.get("arguments")
                        args: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
                        steps.append(ToolStep(start + len(steps), -1, str(tc.get("function_name") or ""), args,
                                              "\n".join(str(r) for r in results) or None))
        elif isinstance(data, Mapping) and isinstance(data.get("messages"), list):  # mini-swe-agent
            messages = [m for m in data["messages"] if isinstance(m, Mapping)]
            for i, m in enumerate(messages):
                if m.get("role") != "assistant":
                    continue
                text = str(m.get("content") or "")
                if "```bash" not in text:
                    continue
                command = text.split("```bash", 1)[1].split("```", 1)[0].strip()
                after = messages[i + 1].get("content") if i + 1 < len(messages) else None
                steps.append(ToolStep(start + len(steps), -1, "bash", {"command": command},
                                      str(after) if after is not None else None))
    return tuple(steps)


#: The attempt and role a core-written call line names right after its task and trial (read without parsing).
_ATTEMPT = re.compile(rb'^\{"task_id":"(?:[^"\\]|\\.)*","trial":\d+,"attempt":(\d+),"index":\d+,"role":'
                      rb'("(?:[^"\\]|\\.)*")')
_MESSAGES = b',"messages":'
#: A call line shorter than this (bytes) is parsed whole: cheaper than parsing it in two parts.
WHOLE_BELOW = 4096
_TOOLS = b'],"tools":'


def _loads(raw: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def call_without_messages(raw: bytes) -> dict[str, Any] | None:
    """A core-written call line (keys in :class:`~agentcompass.models.metering.CallRecord` order) as its JSON object
    without ``messages``, the prompt left unparsed: what comes before the key and what comes after its list, each
    parsed alone. ``None`` when the line is not laid out so (then parse it whole).

    A quote inside a JSON string is escaped, so ``,"messages":`` first appears as the key itself; ``],"tools":``
    may also appear inside the messages (a nested object), but the rest of the line parses as one object only
    from the real one (from inside the list, the list's own closing bracket is left unmatched)."""
    start = raw.find(_MESSAGES)
    if start < 0:
        return None
    head = _loads(raw[:start] + b"}")
    if head is None:
        return None
    at = raw.find(_TOOLS, start)
    while at >= 0:
        tail = _loads(b"{" + raw[at + 2:])
        if tail is not None:
            head.update(tail)
            return head
        at = raw.find(_TOOLS, at + 1)
    return None


def attempt_calls(reader: RunReader, key: Key, attempt: int, f: BinaryIO | None = None) -> list[dict[str, Any]]:
    """The model calls of ``key``'s ``attempt``, in order: the last call of each role whole, the others without
    their ``messages``; a line not laid out as the core writes it is parsed whole, a damaged one passed over.
    ``f``: ``trajectories.jsonl`` already open (binary), to read many attempts without reopening it."""
    spans = reader.trajectory_lines.get(key, [])
    if not spans:
        return []
    path = reader.path / TRAJECTORIES
    lines: list[tuple[bytes, bytes | None]] = []  # (raw line, its role's JSON string when read off the line)
    try:
        with contextlib.nullcontext(f) if f is not None else open(path, "rb") as f:
            for offset, length in spans:
                f.seek(offset)
                raw = f.read(length)
                match = _ATTEMPT.match(raw)
                if match is not None:
                    if int(match.group(1)) == attempt:
                        lines.append((raw, match.group(2)))
                    continue
                data = _loads(raw)
                if data is not None and data.get("attempt", 1) == attempt:
                    lines.append((raw, None))
    except OSError as exc:
        raise ResultsError(f"cannot read {path}: {exc.strerror or describe(exc)}") from None
    last_of_role: dict[bytes | None, int] = {}
    for i, (_, role) in enumerate(lines):
        last_of_role[role] = i
    whole = set(last_of_role.values())
    calls: list[dict[str, Any]] = []
    for i, (raw, role) in enumerate(lines):
        partly = i not in whole and role is not None and len(raw) > WHOLE_BELOW
        call = call_without_messages(raw) if partly else None
        if call is None:
            call = _loads(raw)
            if call is not None and i not in whole and role is not None:
                call.pop("messages", None)  # the same either way: only the last call of a role keeps them
        if call is not None:
            calls.append(call)
    return calls


def last_messages_only(calls: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``calls`` (one attempt's, in order) as :func:`attempt_calls` reads them back: only the last call of each
    role keeps its ``messages`` (the others' are a prefix of it); the calls themselves are left unchanged."""
    last_of_role = {call.get("role"): i for i, call in enumerate(calls)}
    whole = set(last_of_role.values())
    return [call if i in whole or "messages" not in call else _without_messages(call) for i, call in enumerate(calls)]


def _without_messages(call: Mapping[str, Any]) -> dict[str, Any]:
    copy = dict(call)
    del copy["messages"]
    return copy


def transcript_of(reader: RunReader, key: Key, record: Mapping[str, Any],
                  calls: Sequence[Mapping[str, Any]] | None = None, any_artifacts: bool = True,
                  trajectories: BinaryIO | None = None) -> Transcript:
    """The transcript of ``record`` (a final result's JSON) and its attempt's calls (read when not given: see
    :func:`attempt_calls`); ``any_artifacts=False`` says the run has no artifact directory at all."""
    if calls is None:
        calls = attempt_calls(reader, key, int(record.get("attempt") or 1), trajectories)
    return transcript_from(reader.path, reader.info, key, record, calls, any_artifacts=any_artifacts,
                           rule=verdict_rule_of(reader.info))


def verdict_rule_of(info: Mapping[str, Any]) -> tuple[str, float] | None:
    """The run's verdict rule (the metric that says pass, and its threshold) from ``run.json``'s recorded metric
    contract; ``None`` when it recorded none."""
    plan = info.get("plan")
    contract = plan.get("metric_contract") if isinstance(plan, Mapping) else None
    if not isinstance(contract, Mapping) or not isinstance(contract.get("primary"), str):
        return None
    try:
        return verdict_rule(contract_from_json(contract))
    except (KeyError, TypeError, ValueError):
        return None


def transcript_from(run_dir: Path, info: Mapping[str, Any], key: Key, record: Mapping[str, Any],
                    calls: Sequence[Mapping[str, Any]], any_artifacts: bool = True,
                    rule: tuple[str, float] | None = None) -> Transcript:
    """The transcript of ``record`` (a final result's JSON) with its attempt's ``calls`` (as
    :func:`attempt_calls` gives them), in the run ``run_dir`` whose ``run.json`` holds ``info``; ``rule``: the
    run's :func:`verdict_rule_of` (without it, ``passed`` is ``None``)."""
    attempt = int(record.get("attempt") or 1)
    request = info.get("request") or {}
    steps = steps_of(calls)
    art = artifacts_dir(run_dir, key[0], key[1], attempt) if any_artifacts else None
    has_art = art is not None and art.is_dir()
    native = native_steps(art, len(steps)) if art is not None and has_art else ()
    metrics = record.get("metrics") or {}
    return Transcript(
        run_id=str(info.get("run_id", "")), task_id=key[0], trial=key[1], attempt=attempt,
        status=str(record.get("status", "")), benchmark=str(request.get("benchmark", "")),
        harness=str(request.get("harness", "")),
        metrics={k: float(v) for k, v in metrics.items() if isinstance(v, int | float)},
        error=record.get("error"), error_phase=record.get("error_phase"),
        final_answer=record.get("final_answer") if isinstance(record.get("final_answer"), str) else None,
        category=record.get("category"), artifacts=record.get("artifacts") or {}, calls=tuple(calls),
        steps=steps + native, artifacts_dir=str(art) if has_art else None,
        passed=_passed(record, rule) if rule is not None else None,
    )


def _passed(record: Mapping[str, Any], rule: tuple[str, float]) -> bool:
    value = (record.get("metrics") or {}).get(rule[0])
    return record.get("status") == "COMPLETED" and isinstance(value, int | float) and float(value) >= rule[1]


def transcripts(reader: RunReader) -> Iterator[Transcript]:
    """The transcript of every final result of the run, in the order they finished."""
    any_artifacts = (reader.path / ARTIFACTS).is_dir()
    rule = verdict_rule_of(reader.info)
    for key, record in list(reader.results.items()):
        calls = attempt_calls(reader, key, int(record.get("attempt") or 1))
        yield transcript_from(reader.path, reader.info, key, record, calls, any_artifacts=any_artifacts, rule=rule)
