"""A run directory's attempts as :class:`~agentcompass.runtime.scanning.Transcript` objects: each final result
with its attempt's model calls, its tool calls (from the conversation, and from an installed agent's own
trajectory among the artifacts) and its artifact directory."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agentcompass.results.lines import ARTIFACTS
from agentcompass.results.reader import Key, RunReader
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


def transcript_of(reader: RunReader, key: Key, record: Mapping[str, Any],
                  calls: list[dict[str, Any]] | None = None) -> Transcript:
    """The transcript of ``record`` (a final result's JSON) and its attempt's calls (read when not given)."""
    attempt = int(record.get("attempt") or 1)
    if calls is None:
        calls = [c for c in reader.trajectory(key) if c.get("attempt", 1) == attempt]
    request = reader.info.get("request") or {}
    steps = steps_of(calls)
    art = artifacts_dir(reader.path, key[0], key[1], attempt)
    native = native_steps(art, len(steps)) if art.is_dir() else ()
    metrics = record.get("metrics") or {}
    return Transcript(
        run_id=str(reader.info.get("run_id", "")), task_id=key[0], trial=key[1], attempt=attempt,
        status=str(record.get("status", "")), benchmark=str(request.get("benchmark", "")),
        harness=str(request.get("harness", "")),
        metrics={k: float(v) for k, v in metrics.items() if isinstance(v, int | float)},
        error=record.get("error"), error_phase=record.get("error_phase"),
        final_answer=record.get("final_answer") if isinstance(record.get("final_answer"), str) else None,
        category=record.get("category"), artifacts=record.get("artifacts") or {}, calls=tuple(calls),
        steps=steps + native, artifacts_dir=str(art) if art.is_dir() else None,
    )


def transcripts(reader: RunReader) -> Iterator[Transcript]:
    """The transcript of every final result of the run, in the order they finished."""
    for key, record in list(reader.results.items()):
        yield transcript_of(reader, key, record)
