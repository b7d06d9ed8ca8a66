"""Runs recorded against a loopback model and replayed through the real CLI, and what of two runs must be
equal when one replays the other (everything but timings and where the answers came from)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentcompass.models.call_key import normalise
from agentcompass.testing import LoopbackOpenAI

from tests.helpers.cli_processes import ROOT, read_jsonl

#: Keys whose values are timings or name an answer's source: they differ between a run and its replay.
VOLATILE = frozenset({"timings", "latency_s", "seconds", "bash_seconds", "started_at", "ttft_s", "source",
                      "replayed", "replay_live", "cache_hits", "cache_saved_tokens", "cache_saved_usd",
                      "saved_cost_usd", "duration_s", "run_dir", "run_id", "started"})


def agentcompass(*args: str, cwd: Path = ROOT, timeout: float = 600,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``agentcompass`` CLI, with no provider variables from the developer's shell (only ``env``)."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}, **(env or {})}
    return subprocess.run([sys.executable, "-m", "agentcompass.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def dead_base_url() -> str:
    """A loopback URL nothing listens on: a provider that is not reachable."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def record(responder: Callable[[dict[str, Any]], Any], *args: str) -> tuple[subprocess.CompletedProcess[str],
                                                                             list[dict[str, Any]]]:
    """``agentcompass ARGS --model-base-url LOOPBACK``, the loopback model answering with ``responder``; the
    process and the requests the model received."""
    with LoopbackOpenAI(responder, api_key=None) as server:
        proc = agentcompass(*args, "--model-base-url", server.base_url)
        return proc, list(server.requests)


def comparable(value: Any) -> Any:
    """``value`` without its :data:`VOLATILE` keys and timings (``*seconds``), recursively."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in VOLATILE and not k.endswith("seconds")}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def results(run_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["task_id"], r.get("trial", 1)): comparable(r) for r in read_jsonl(run_dir / "results.jsonl")}


def calls(run_dir: Path) -> dict[tuple[str, int, str, int], dict[str, Any]]:
    """Each call by (task, trial, role, n-th call of the role): its request (normalised: the temporary paths
    differ), answer and tokens."""
    out: dict[tuple[str, int, str, int], dict[str, Any]] = {}
    seen: dict[tuple[str, int, str], int] = {}
    for c in read_jsonl(run_dir / "trajectories.jsonl"):
        n = seen[(c["task_id"], c["trial"], c["role"])] = seen.get((c["task_id"], c["trial"], c["role"]), 0) + 1
        out[(c["task_id"], c["trial"], c["role"], n)] = {
            "request": normalise(c["messages"], (), c.get("params")), "request_key": c["request_key"],
            "tools": c["tools"], "response": c["response"], "error": c["error"], "tokens": (
                c["prompt_tokens"], c["completion_tokens"]), "finish_reason": c["finish_reason"]}
    return out


def sources(run_dir: Path) -> list[str | None]:
    return [c.get("source") for c in read_jsonl(run_dir / "trajectories.jsonl")]


def summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())
