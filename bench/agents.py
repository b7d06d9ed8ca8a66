"""Figures for the installed agents (``agentcompass-agents``) under ``docker``, on this machine's engine.

1. **Install**, per agent: *cold* — its bundle built with ``docker build --no-cache`` (every layer, the shared
   Node/builder layers too: what a fresh machine pays), unless ``--no-cold``; *bundle cached* — the same
   harness finding its bundle by tag on a later run (``ensure_bundle``); *derived image* — the per-task-image
   ``COPY`` build the ``docker`` environment runs once per image (first build, then found by its content hash).
2. **Per-task overhead**, per agent: one task whose model answers at once (a short text, no tool call), the
   run phase's time (median over ``--tasks`` tasks, concurrency 1): starting the agent, its first model call,
   its exit, collecting its directory — against the ``command`` harness running ``true`` on the same tasks.

Figures are printed, not asserted. Usage: uv run python bench/agents.py [--agents opencode,mini-swe-agent]
[--tasks 5] [--no-cold]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

from agentcompass.runtime import BaseBenchmark, EnvironmentSpec, TaskSpec, TaskStatus
from agentcompass.testing import LoopbackOpenAI, run_benchmark, text
from agentcompass_agents.catalog import AGENTS
from agentcompass_agents.install import Installer

#: Every agent (the gateway serves each one's protocol: chat completions, Responses, Messages, Gemini).
DEFAULT_AGENTS = tuple(AGENTS)


class Quick(BaseBenchmark):
    """``n`` tasks with a one-line instruction; nothing to score."""

    name = "bench-agents"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.n = int(options.get("n", 5))

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        return [TaskSpec(task_id=f"q{i}", data={"instruction": "Say done."}) for i in range(self.n)]

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        return replace(result, metrics={"score": 1.0 if result.status is TaskStatus.COMPLETED else 0.0})


def install_figures(name: str, cold: bool) -> dict[str, float]:
    agent = AGENTS[name]
    figures: dict[str, float] = {}
    installer = Installer(progress=None)
    tag = installer.bundle_tag(agent, agent.version)
    if cold:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)
        original = installer.docker
        started = time.monotonic()
        installer_cold = Installer(progress=None, docker=original)
        # --no-cache: every layer again, as on a fresh machine.
        _build_no_cache(installer_cold, name)
        figures["cold_s"] = time.monotonic() - started
    started = time.monotonic()
    Installer(progress=None).ensure_bundle(agent, agent.version)
    figures["bundle_cached_s"] = time.monotonic() - started
    with tempfile.TemporaryDirectory() as root:
        spec = Installer(progress=None, root=Path(root)).derive(EnvironmentSpec(), agent, agent.version, tag)
        context = spec.build_context or ""
        derived = f"agentcompass-bench-derived:{name}"
        for key in ("derived_first_s", "derived_cached_s"):
            started = time.monotonic()
            subprocess.run(["docker", "build", "-q", "-t", derived, context], check=True, capture_output=True,
                           env={"DOCKER_BUILDKIT": "0", "PATH": "/usr/bin:/bin:/usr/local/bin"})
            figures[key] = time.monotonic() - started
            if key == "derived_first_s":
                pass
        subprocess.run(["docker", "image", "rm", "-f", derived], capture_output=True)
    return figures


def _build_no_cache(installer: Installer, name: str) -> None:
    agent = AGENTS[name]
    tag = installer.bundle_tag(agent, agent.version)
    with tempfile.TemporaryDirectory() as context:
        for file, data in installer._context_files(agent, agent.version).items():
            Path(context, file).write_bytes(data)
        subprocess.run(["docker", "build", "--no-cache", "-q", "-t", tag, context], check=True,
                       capture_output=True, env={"DOCKER_BUILDKIT": "0", "PATH": "/usr/bin:/bin:/usr/local/bin"})


async def overhead(harness: str, tasks: int, harness_args: dict[str, str]) -> float:
    with LoopbackOpenAI(lambda request: text("done"), api_key=None) as server:
        run = await run_benchmark(Quick, harness, "openai-compatible/bench", environment="docker",
                                  benchmark_args={"n": str(tasks)}, harness_args=harness_args,
                                  model_base_url=server.base_url, concurrency=1, max_retries=0,
                                  run_dir=Path(tempfile.mkdtemp(prefix="agentcompass-bench-agents-")))
    bad = [r.error for r in run.results if r.status is not TaskStatus.COMPLETED]
    if bad:
        raise SystemExit(f"{harness}: {bad[0]}")
    return median(r.timings["run"] for r in run.results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", default=",".join(DEFAULT_AGENTS))
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--no-cold", action="store_true", help="skip the --no-cache builds")
    args = parser.parse_args()
    names = [n for n in args.agents.split(",") if n]
    print(f"{'agent':16} {'cold':>9} {'cached':>9} {'derived 1st':>12} {'derived again':>14}")
    for name in names:
        f = install_figures(name, cold=not args.no_cold)
        cold = f"{f['cold_s']:.0f} s" if "cold_s" in f else "-"
        print(f"{name:16} {cold:>9} {f['bundle_cached_s']:>7.2f} s {f['derived_first_s']:>10.2f} s "
              f"{f['derived_cached_s']:>12.2f} s", flush=True)
    base = asyncio.run(overhead("command", args.tasks, {"command": "true"}))
    print(f"\nrun phase per task (median of {args.tasks}, model answering at once)")
    print(f"{'command true':16} {base:8.2f} s")
    for name in names:
        seconds = asyncio.run(overhead(name, args.tasks, {"progress": "false"}))
        print(f"{name:16} {seconds:8.2f} s   (+{seconds - base:.2f} s over command)", flush=True)


if __name__ == "__main__":
    main()
