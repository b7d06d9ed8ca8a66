"""Per-task cost of the ``docker`` environment against plain ``docker run --rm``, on this machine's engine, and
the latency of one ``exec``.

Workload per task, through the provider: open a container → exec ``true`` → write a file → read it back →
close. Baseline per task: ``docker run --rm --network none python:3.11-slim sh -c 'true; write; read'``
(one container doing the same work, driven through python-on-whales as well). Each at concurrency 1 and 8.

Variants: ``server`` (the default: the exec server inside the container, small writes batched into the next
request), ``pool`` (``server`` plus ``prestart=<concurrency>``: containers started ahead of their tasks),
``docker`` (``exec=docker``: one ``docker exec`` per call, the old path), ``no-batching`` (``server`` with
``write_delay=0``), ``gateway`` (``server`` plus a model-gateway socket, so every container also relays it);
``server-python`` and ``pool-python``: the same with ``server=python`` (the Python exec server instead of the
static binary, as before it existed); ``pool-before``: ``pool-python`` with ``cgroup_parent=`` as well (the
engine's own cgroup), which is how containers ran before either change; ``pool-engine-cgroup``: ``pool`` (the
static server) under the engine's own cgroup, as the baseline's containers are.
Each round sets every variant up afresh (as a run does: ``setup`` with one spec per task, then ``plan``, the
pool predicting exactly those), untimed, then times its tasks; rounds are interleaved, so a change in the
machine's load affects all variants alike.

Prints, per variant and concurrency: median and p95 seconds per task, tasks per second, the ratio to the
baseline (median time, and throughput: baseline tps / variant tps, so below 1 is faster), and where a task's
time goes (median open / exec / write+read / close, ms). Then, unless ``--no-latency``: one ``exec`` of
``true`` through a session (median, p95, ms) on each path, against ``docker exec`` of the same container.
Figures are printed, not asserted.

``--work SECONDS`` adds that much work to every task (an ``exec`` of ``sleep`` / a ``sleep`` in the baseline),
as real tasks have: then the warm pool hides container starts behind it. ``--isolation-baseline`` adds
``run+isolation``: ``docker run --rm`` with the flags the provider's containers get (``--init``, memory, CPU and
process limits, ``--cap-drop ALL``, ``no-new-privileges``), to tell the engine's share from the provider's.

Usage: uv run python bench/docker_env.py [--n 100] [--concurrency 1 8] [--rounds 5] [--variants ...]
       [--latency-n 200] [--no-latency] [--work 0] [--isolation-baseline]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from agentcompass.runtime.environment import EnvironmentDemand
from agentcompass.runtime.types import EnvironmentSpec
from agentcompass_docker.provider import DockerProvider
from python_on_whales import docker

IMAGE = "python:3.11-slim"
PAYLOAD = "x" * 1024
#: Seconds of work per task (``--work``): an ``exec`` of ``sleep`` through the provider, a ``sleep`` in the
#: baseline's script. 0: the bare per-task overhead.
WORK = 0.0
#: What the provider's containers get that a bare ``docker run`` does not (the ``run+isolation`` baseline).
ISOLATION = dict(init=True, memory="2g", memory_swap="2g", cpus=1.0, pids_limit=512, cap_drop=["ALL"],
                 security_options=["no-new-privileges"])


async def timed_tasks(n: int, concurrency: int, task: Callable[[int], Awaitable[None]]) -> tuple[list[float], float]:
    """Run ``task(i)`` for i < n, at most ``concurrency`` at once; per-task seconds and the wall time."""
    slots = asyncio.Semaphore(concurrency)
    durations: list[float] = []

    async def one(i: int) -> None:
        async with slots:
            start = time.perf_counter()
            await task(i)
            durations.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return durations, time.perf_counter() - start


class ProviderVariant:
    """The provider workload; a fresh provider (a fresh "run") per round, set up untimed."""

    def __init__(self, name: str, gateway: str | None, **options: str) -> None:
        self.name, self.gateway, self.options = name, gateway, options
        self.provider: DockerProvider | None = None
        self.run_id = ""
        self.phases: dict[str, list[float]] = {"open": [], "exec": [], "io": [], "close": []}
        #: Of containers started on demand (server path): engine create+start, then until the server answered.
        self.starts: dict[str, list[float]] = {"create_start": [], "server_ready": []}
        self.pooled = 0
        self.rounds = 0

    async def start_round(self, tasks: int, concurrency: int) -> None:
        self.rounds += 1
        self.run_id = f"bench-{self.name}-{concurrency}-{os.getpid()}-{self.rounds}"
        self.provider = DockerProvider(**self.options)
        specs = [EnvironmentSpec(image=IMAGE) for _ in range(tasks)]  # one per task, as a benchmark makes them
        await self.provider.setup(specs, run_id=self.run_id)
        if self.gateway:
            self.provider.gateway_address(host="127.0.0.1", port=8765, unix_socket=self.gateway)
        await self.provider.plan(EnvironmentDemand(tuple(specs), concurrency=concurrency))

    async def task(self, i: int) -> None:
        assert self.provider is not None
        t0 = time.perf_counter()
        session = await self.provider.open(EnvironmentSpec(image=IMAGE), run_id=self.run_id, task_id=f"t{i}",
                                           base_env={})
        t1 = time.perf_counter()
        seconds = getattr(session, "start_seconds", {})
        if seconds.get("pooled"):
            self.pooled += 1
        elif seconds:
            for key in self.starts:
                self.starts[key].append(seconds[key])
        try:
            result = await session.exec(["true"])
            assert result.returncode == 0, result
            if WORK:
                assert (await session.exec(["sleep", str(WORK)])).returncode == 0
            t2 = time.perf_counter()
            await session.write_text("data.txt", PAYLOAD)
            assert await session.read_text("data.txt") == PAYLOAD
            t3 = time.perf_counter()
        finally:
            await self.provider.close(session)
        t4 = time.perf_counter()
        for phase, seconds in zip(self.phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            self.phases[phase].append(seconds)

    async def end_round(self) -> None:
        assert self.provider is not None
        await self.provider.teardown()


class BaselineVariant:
    """``docker run --rm`` doing the same work in one container."""

    def __init__(self, concurrency: int, isolation: bool = False) -> None:
        self.pool = ThreadPoolExecutor(max(concurrency, 4))
        self.script = f"true && printf %s '{PAYLOAD}' > /tmp/data.txt && cat /tmp/data.txt"
        if WORK:
            self.script = f"sleep {WORK} && {self.script}"
        self.flags = ISOLATION if isolation else {}

    async def start_round(self, tasks: int, concurrency: int) -> None:
        pass

    async def end_round(self) -> None:
        pass

    def blocking(self) -> None:
        out = docker.container.run(IMAGE, ["sh", "-c", self.script], remove=True, networks=["none"], pull="never",
                                   **self.flags)
        assert out == PAYLOAD, out[:100]

    async def task(self, i: int) -> None:
        await asyncio.get_running_loop().run_in_executor(self.pool, self.blocking)

    def close(self) -> None:
        self.pool.shutdown()


def describe(durations: list[float], wall: float) -> dict[str, float]:
    ordered = sorted(durations)
    return {
        "median": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
        "tps": len(ordered) / wall,
    }


def serve_dummy_socket(directory: str) -> str:
    path = os.path.join(directory, "gateway.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    os.chmod(path, 0o777)
    return path


VARIANTS = ("server", "pool", "docker", "no-batching", "gateway", "server-python", "pool-python", "pool-before",
            "pool-engine-cgroup")


def variant_options(name: str, concurrency: int) -> dict[str, str]:
    if name.endswith("-python"):  # the Python exec server (what every container ran before the static one)
        return {**variant_options(name.removesuffix("-python"), concurrency), "server": "python"}
    if name.endswith("-engine-cgroup"):  # the static server, under the engine's own cgroup as the baseline is
        return {**variant_options(name.removesuffix("-engine-cgroup"), concurrency), "cgroup_parent": ""}
    if name.endswith("-before"):  # ... and under the engine's own cgroup, as before both changes
        return {**variant_options(name.removesuffix("-before"), concurrency), "server": "python", "cgroup_parent": ""}
    if name == "pool":
        return {"prestart": str(concurrency)}
    if name == "docker":
        return {"exec": "docker"}
    if name == "no-batching":
        return {"write_delay": "0", "prestart": "0"}
    return {"prestart": "0"}  # server, gateway: no pool (the default would start one at concurrency > 1)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variants", nargs="+", default=["server", "pool", "docker"], choices=VARIANTS)
    parser.add_argument("--latency-n", type=int, default=200)
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--work", type=float, default=0.0, help="seconds of work per task (default 0)")
    parser.add_argument("--isolation-baseline", action="store_true",
                        help="also time docker run --rm with the provider's isolation flags (init, limits, caps)")
    args = parser.parse_args()
    global WORK
    WORK = args.work
    try:
        docker.system.info()
    except Exception as exc:
        sys.exit(f"no Docker engine: {exc}")
    socket_dir = tempfile.mkdtemp(prefix="agentcompass-bench-")
    os.chmod(socket_dir, 0o755)
    try:
        if args.n:
            await measure(args, serve_dummy_socket(socket_dir))
        if not args.no_latency:
            await measure_latency(args.latency_n)
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


async def measure(args: argparse.Namespace, gateway_socket: str) -> None:
    per_round = max(1, args.n // args.rounds)
    print(
        f"docker environment bench: {per_round * args.rounds} tasks per cell in {args.rounds} interleaved rounds, "
        f"{WORK:g} s of work per task, image {IMAGE}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    header = ("variant", "conc", "median s", "p95 s", "tasks/s", "× base (median)", "× base (tps)",
              "open/exec/io/close ms")
    print("{:<13}{:>5}{:>10}{:>9}{:>9}{:>17}{:>14}   {}".format(*header))
    for concurrency in args.concurrency:
        variants: dict[str, ProviderVariant | BaselineVariant] = {"docker run": BaselineVariant(concurrency)}
        if args.isolation_baseline:
            variants["run+isolation"] = BaselineVariant(concurrency, isolation=True)
        for name in args.variants:
            gateway = gateway_socket if name == "gateway" else None
            variants[name] = ProviderVariant(name, gateway, **variant_options(name, concurrency))
        durations: dict[str, list[float]] = {name: [] for name in variants}
        walls = dict.fromkeys(variants, 0.0)
        try:
            for _ in range(args.rounds):  # interleaved, so a change in the machine's load hits all alike
                for name, variant in variants.items():
                    await variant.start_round(per_round, concurrency)
                    try:
                        got, wall = await timed_tasks(per_round, concurrency, variant.task)
                    finally:
                        await variant.end_round()
                    durations[name] += got
                    walls[name] += wall
        finally:
            for variant in variants.values():
                if isinstance(variant, BaselineVariant):
                    variant.close()
        base = describe(durations["docker run"], walls["docker run"])
        for name, variant in variants.items():
            got = describe(durations[name], walls[name])
            phases = ""
            if isinstance(variant, ProviderVariant):
                phases = "/".join(f"{statistics.median(v) * 1000:.0f}" for v in variant.phases.values())
            print(
                f"{name:<13}{concurrency:>5}{got['median']:>10.3f}{got['p95']:>9.3f}{got['tps']:>9.2f}"
                f"{got['median'] / base['median']:>17.2f}{base['tps'] / got['tps']:>14.2f}   {phases}"
            )
        for name, variant in variants.items():
            if isinstance(variant, ProviderVariant) and (variant.starts["create_start"] or variant.pooled):
                split = ", ".join(
                    f"{key} {statistics.median(v) * 1000:.0f} ms" for key, v in variant.starts.items() if v
                )
                print(f"  {name} c={concurrency}: {variant.pooled} of {len(variant.phases['open'])} tasks took a pool "
                      f"container; starts on demand (median): {split or '-'}")


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms"


async def measure_latency(n: int) -> None:
    """One ``exec`` of ``true``: through a session on each path, and as a bare ``docker exec``."""
    print(f"\nexec latency: {n} sequential `true` per path, one container each")
    for mode in ("server", "docker"):
        provider = DockerProvider(exec=mode)
        run_id = f"bench-latency-{mode}-{os.getpid()}"
        await provider.setup([EnvironmentSpec(image=IMAGE)], run_id=run_id)
        try:
            session = await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id="lat", base_env={})
            samples = []
            for _ in range(n if mode == "server" else max(20, n // 4)):
                start = time.perf_counter()
                result = await session.exec(["true"])
                samples.append(time.perf_counter() - start)
                assert result.returncode == 0
            print(f"  session, exec={mode:<7} {percentiles(samples)}   ({len(samples)} calls)")
            if mode == "docker":
                container = getattr(session, "container_id", "")
                cli = shutil.which("docker") or "docker"
                raw = []
                for _ in range(max(20, n // 4)):
                    start = time.perf_counter()
                    await asyncio.to_thread(subprocess.run, [cli, "exec", container, "true"], check=True)
                    raw.append(time.perf_counter() - start)
                print(f"  `docker exec CONTAINER true`  {percentiles(raw)}   ({len(raw)} calls)")
            await provider.close(session)
        finally:
            await provider.teardown()


if __name__ == "__main__":
    asyncio.run(main())
