"""The taubench oracle through the real CLI: a whole domain, every task in its own environment.

Workload: ``agentcompass run taubench oracle mock -b domain=retail --env docker -c 8`` — 114 tasks, each a
container (from an image holding the runner and the retail data) that gets its request, replays the gold
actions through the runner's orchestrator (no model) and is scored by the runner's evaluator in the same
container.

First, unless ``--no-floor``, the docker floor at this moment: as many containers as tasks, at the same
concurrency, each with the model gateway's forwarder, given a request-sized write and two trivial ``python3``
execs (what a task costs the environment before the runner does anything), through the same provider.

Then, per repetition: the wall time of the whole command (start-up, image checks, every task, teardown),
tasks per second and wall time per task; the phases' median and p95 per task (prepare includes the
container's start); the runner's own CPU time inside the environment per conversation step, for the
conversation alone and for the whole ``oracle`` process (loading the domain included); and the evaluator's
CPU per task. Target on this machine's 2 cores: the retail domain in at most 30 s.

The first run of a data version builds the image (tagged by content, reused afterwards): a one-task warm-up
run does that before anything is measured.

With ``--env local,docker`` (oracle or scripted) the environments run in interleaved rounds (``--repeat N``)
and the difference per task-slot, ``(docker wall - local wall) * concurrency / tasks``, is printed with its range
over the rounds. Each run also prints the CPU time of the CLI's process tree (the head process, the ``docker``
CLI calls and, under ``local``, the runner processes; not the engine's daemons nor the containers').

``--env docker+before``: the docker environment as it ran before the static exec server and the cgroup change
(``--env-arg server=python --env-arg cgroup_parent=``), for a comparison in the same conditions.

``--scripted``: instead of the oracle, the retail domain's 74 ``train`` conversations driven through the model
gateway by a loopback OpenAI server playing the agent (the gold actions as tool calls) and the user (its
request, then ``###STOP###``) — the test suite's scripted participants (``tests/taubench/tb_support.py``) —
each scored by the evaluator; with ``--env local,docker --repeat N`` the environments run in interleaved
rounds and the difference per task (``(docker wall - local wall) * concurrency / tasks``) is printed with its
range over the rounds.

Telecom (``--domain telecom``): the 20-task set, where the oracle's gold path has the user make their actions
on the phone as tool calls of their own; measure it under both environments with ``--env local,docker``.

Usage: uv run python bench/taubench.py [--domain retail] [--env docker|local|local,docker] [--concurrency 8]
       [--repeat 1] [--no-floor] [--scripted] [--env-arg KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Wall-time targets of a whole domain's oracle run on this machine's 2 cores.
TARGET_SECONDS = {"retail": 30.0}
TASKS = {"mock": 10, "airline": 50, "retail": 114, "telecom": 20}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def docker_floor(n: int, concurrency: int, options: dict[str, str] | None = None) -> float:
    """Seconds for ``n`` containers, ``concurrency`` at once, each: a 16 KB write, two ``python3 -c pass``;
    with a model-gateway socket, so every container also starts the gateway's forwarder, as in a run.
    ``options``: the docker environment's (``--env-arg``)."""
    from agentcompass.runtime.types import EnvironmentSpec
    from agentcompass_docker.provider import DockerProvider

    provider, spec = DockerProvider(**(options or {})), EnvironmentSpec()
    run_id = f"taubench-floor-{os.getpid()}"
    await provider.setup([spec], run_id=run_id)
    directory = tempfile.mkdtemp(prefix="taubench-floor-")
    gateway = socket.socket(socket.AF_UNIX)
    gateway.bind(os.path.join(directory, "gateway.sock"))
    gateway.listen()
    os.chmod(os.path.join(directory, "gateway.sock"), 0o777)
    provider.gateway_address(host="127.0.0.1", port=8765, unix_socket=os.path.join(directory, "gateway.sock"))
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with slots:
            session = await provider.open(spec, run_id=run_id, task_id=f"t{i}", base_env={})
            try:
                await session.write_text("taubench/request.json", "x" * 16_000)
                for _ in range(2):
                    result = await session.exec(["python3", "-S", "-c", "pass"])
                    assert result.returncode == 0, result
            finally:
                await provider.close(session)

    start = time.perf_counter()
    try:
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - start
    finally:
        await provider.teardown()
        gateway.close()
        shutil.rmtree(directory, ignore_errors=True)


def run_once(args: argparse.Namespace, environment: str, out: Path, limit: int | None = None) -> float:
    command = [sys.executable, "-m", "agentcompass.cli.main", "run", "taubench"]
    if args.scripted:
        command += ["none", "openai-compatible/agent-model", "--model-base-url", args.base_url,
                    "--user-model", "openai-compatible/user-model", "--judge-model", "openai-compatible/judge-model",
                    "-b", "split=train"]
    else:
        command += ["oracle", "mock"]
    options = list(args.env_arg)
    if environment == "docker+before":  # the docker environment as it ran before the static server and cgroups
        environment, options = "docker", [*options, "server=python", "cgroup_parent="]
    command += ["-b", f"domain={args.domain}", "--env", environment, "-c", str(args.concurrency), "--json",
                "-o", str(out)]
    if environment == "docker":
        for option in options:
            command += ["--env-arg", option]
    if limit is not None:
        command += ["-n", str(limit)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    cpu_before = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"the run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    args.last_cpu = _children_cpu() - cpu_before
    return wall


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children and everything they waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def report(wall: float, out: Path, domain: str, oracle: bool = True, cpu: float | None = None) -> None:
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    n = len(records)
    rewards = [r["metrics"].get("reward") for r in records]
    phases = {p: [r["timings"].get(p, 0.0) for r in records] for p in ("prepare", "run", "evaluate", "total")}
    runner = [r["artifacts"]["official_result"]["runner"] for r in records]
    steps = sum(r["artifacts"]["official_result"]["steps"] for r in records)
    conversation_cpu = sum(x["conversation_cpu_seconds"] for x in runner)
    process_cpu = sum(x["cpu_seconds"] for x in runner)
    load_cpu = [x["load_cpu_seconds"] for x in runner]
    evaluator_cpu = [r["artifacts"]["evaluation"]["evaluator"]["cpu_seconds"] for r in records]
    print(f"  tasks: {n}, reward 1.0 on {sum(1 for x in rewards if x == 1.0)}, steps: {steps}")
    target = TARGET_SECONDS.get(domain) if oracle else None
    verdict = "" if target is None else f"  target <= {target:.0f} s: {'met' if wall <= target else 'NOT met'}"
    print(f"  wall: {wall:.1f} s  ({n / wall:.2f} tasks/s, {wall / n * 1000:.0f} ms per task){verdict}")
    if cpu is not None:
        print(f"  CLI process tree CPU: {cpu:.1f} s ({cpu / n * 1000:.0f} ms per task; engine daemons and "
              f"containers not included)")
    for phase, values in phases.items():
        print(f"  {phase:<9} per task: median {statistics.median(values) * 1000:6.0f} ms, "
              f"p95 {quantile(values, 0.95) * 1000:6.0f} ms")
    print(f"  runner CPU per conversation step: {conversation_cpu / steps * 1e6:.0f} us (conversation), "
          f"{process_cpu / steps * 1000:.2f} ms (whole oracle process, loading included)")
    print(f"  runner start-up CPU per task (interpreter and imports excluded; loading the domain): median "
          f"{statistics.median(load_cpu) * 1000:.0f} ms")
    print(f"  evaluator CPU per task: median {statistics.median(evaluator_cpu) * 1000:.0f} ms, "
          f"p95 {quantile(evaluator_cpu, 0.95) * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domain", default="retail")
    parser.add_argument("--env", default="docker", help="an environment, or a comma list of them")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-floor", action="store_true", help="skip the docker floor measurement")
    parser.add_argument("--scripted", action="store_true",
                        help="the 74 scripted retail train conversations instead of the oracle")
    parser.add_argument("--env-arg", action="append", default=[], help="passed to docker runs (KEY=VALUE)")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    workload = "scripted conversations (split train)" if args.scripted else "oracle"
    print(f"taubench {workload} bench: domain {args.domain}, env {args.env}, concurrency {args.concurrency}, "
          f"{os.cpu_count()} CPUs, load average {load:.1f}, docker --env-arg {args.env_arg or '-'}")
    environments = [e.strip() for e in args.env.split(",") if e.strip()]
    if not args.scripted:
        if len(environments) == 1:
            measure(args, environments[0])
        else:
            interleaved(args, environments)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "taubench"))
    import tb_support
    from agentcompass.testing import LoopbackOpenAI

    responder = tb_support.role_responder(judge=tb_support.approving_judge)
    with LoopbackOpenAI(responder, api_key=None) as server, tempfile.TemporaryDirectory(prefix="taubench-") as tmp:
        args.base_url = server.base_url
        for environment in environments:
            run_once(args, environment, Path(tmp) / f"warm-up-{environment}", limit=1)
        run_rounds(args, environments, Path(tmp), oracle=False, target=0.5)


#: The docker environment's extra wall time per task-slot over ``local`` that the oracle run aims at.
ORACLE_SLOT_TARGET = 0.3


def run_rounds(args: argparse.Namespace, environments: list[str], tmp: Path, *, oracle: bool,
               target: float) -> None:
    """``--repeat`` rounds, each running every environment once (interleaved: a change in the machine's load
    hits every environment alike); then the walls and, for ``local`` with a docker variant, the difference per
    task-slot: ``(docker wall - local wall) * concurrency / tasks``."""
    walls: dict[str, list[float]] = {e: [] for e in environments}
    tasks = 0
    for i in range(args.repeat):
        for environment in environments:
            out = tmp / f"{environment}-{i}"
            wall = run_once(args, environment, out)
            walls[environment].append(wall)
            tasks = len((out / "results.jsonl").read_text().splitlines())
            print(f"== env {environment}, round {i + 1} (load average {os.getloadavg()[0]:.1f}):")
            report(wall, out, args.domain, oracle=oracle, cpu=args.last_cpu)
    print("walls: " + "; ".join(f"{e} {', '.join(f'{w:.1f}' for w in ws)} s" for e, ws in walls.items()))
    for docker in ("docker", "docker+before"):
        if {"local", docker} <= set(walls):
            extra = [(d - lo) * args.concurrency / tasks
                     for lo, d in zip(walls["local"], walls[docker], strict=True)]
            print(f"{docker} - local per task (c={args.concurrency}): median {statistics.median(extra):.2f} s, "
                  f"range {min(extra):.2f}..{max(extra):.2f} s  (target <= {target} s)")


def interleaved(args: argparse.Namespace, environments: list[str]) -> None:
    """The oracle in several environments: a warm-up run each, the docker floor, then interleaved rounds."""
    with tempfile.TemporaryDirectory(prefix="taubench-bench-") as tmp:
        for environment in environments:
            run_once(args, environment, Path(tmp) / f"warm-up-{environment}", limit=1)
        if any(e.startswith("docker") for e in environments) and not args.no_floor:
            print_floor(args)
        run_rounds(args, environments, Path(tmp), oracle=True, target=ORACLE_SLOT_TARGET)


def print_floor(args: argparse.Namespace) -> None:
    n = sum(TASKS.get(d.strip(), 0) for d in args.domain.split(","))
    options = dict(option.split("=", 1) for option in args.env_arg)
    floor = asyncio.run(docker_floor(n, args.concurrency, options))
    print(f"docker floor: {n} containers with the gateway's forwarder, a write and 2 trivial execs each: "
          f"{floor:.1f} s "
          f"({floor / n * 1000:.0f} ms per container)")


def measure(args: argparse.Namespace, environment: str) -> None:
    print(f"== env {environment}")
    with tempfile.TemporaryDirectory(prefix="taubench-bench-") as tmp:
        run_once(args, environment, Path(tmp) / "warm-up", limit=1)
        if environment == "docker" and not args.no_floor:
            print_floor(args)
        for i in range(args.repeat):
            out = Path(tmp) / f"run{i}"
            wall = run_once(args, environment, out)
            print(f"repetition {i + 1}:")
            report(wall, out, args.domain, cpu=args.last_cpu)


if __name__ == "__main__":
    main()
