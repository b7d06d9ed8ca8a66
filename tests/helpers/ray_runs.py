"""Runs of the CLI against a local Ray cluster (:mod:`tests.helpers.ray_cluster`), and what to compare of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.cli_processes import ROOT, default_signals
from tests.helpers.ray_cluster import LocalCluster, cmdline

HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"


def cli_argv(*args: str, testing: bool = False) -> list[str]:
    module = "tests.helpers.cli" if testing else "agentcompass.cli.main"
    return [sys.executable, "-m", module, *args]


def on_cluster(cluster: LocalCluster) -> list[str]:
    """The options that send a run to ``cluster`` from its head node."""
    return ["--executor", "ray", "--executor-arg", f"address={cluster.address}",
            "--executor-arg", f"node_ip={HEAD_IP}"]


def run_cli(cluster: LocalCluster | None, *args: str, env: dict[str, str] | None = None, timeout: float = 240,
            testing: bool = False) -> subprocess.CompletedProcess[str]:
    """``agentcompass ARGS`` in a child process (a driver of ``cluster``'s when given)."""
    full_env = {**os.environ, **(cluster.driver_env() if cluster else {}), **(env or {})}
    return subprocess.run(cli_argv(*args, testing=testing), cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=full_env, preexec_fn=default_signals)


def start_cli(cluster: LocalCluster, *args: str, env: dict[str, str] | None = None,
              testing: bool = False) -> subprocess.Popen[str]:
    full_env = {**os.environ, **cluster.driver_env(), **(env or {})}
    return subprocess.Popen(cli_argv(*args, testing=testing), cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=full_env, preexec_fn=default_signals)


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def comparable(run_dir: Path, answers: bool = True) -> dict[tuple[str, int], tuple[Any, ...]]:
    """What must agree between two runs of the same request and seed: per (task, trial), the status, scores,
    answer (unless ``answers`` is false: one that names its working directory differs run to run), error
    phase, seed and the agent's token counts (not timings)."""
    out = {}
    for r in records(run_dir / "results.jsonl"):
        agent = ((r.get("usage") or {}).get("models") or {}).get("agent") or {}
        out[(r["task_id"], r["trial"])] = (
            r["status"], r["metrics"], r.get("final_answer") if answers else None, r.get("error_phase"), r.get("seed"),
            agent.get("calls"), agent.get("prompt_tokens"), agent.get("completion_tokens"))
    return out


def log_events(run_dir: Path, event: str) -> list[dict[str, Any]]:
    return [e for e in records(run_dir / "logs.jsonl") if e.get("event") == event]


def node_workers(cluster: LocalCluster, ip: str) -> list[int]:
    """The pids of this run's Ray actors (``ray::NodeWorker``) on the node at ``ip``."""
    node = next(n for n in cluster.nodes if n.ip == ip)
    return sorted(p for p in node.pids() if cmdline(p).startswith("ray::NodeWorker"))
