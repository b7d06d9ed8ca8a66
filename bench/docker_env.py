"""Per-task cost of the ``docker`` environment against plain ``docker run --rm``, on this machine's engine.

Workload per task, through the provider: open a container → exec ``true`` → write a file → read it back →
close. Baseline per task: ``docker run --rm --network none python:3.11-slim sh -c 'true; write; read'``
(one container doing the same work, driven through python-on-whales as well). Each at concurrency 1 and 8.

Variants: ``default`` (small writes batched into the next call), ``no-batching`` (``write_delay=0``: every
write is its own docker call), ``gateway`` (default plus a model-gateway socket, so every container also
starts the forwarder). Cells are interleaved: each of ``--rounds`` rounds runs n/rounds tasks of every
variant in turn, so a change in the machine's load affects all of them alike.

Prints, per variant and concurrency: median and p95 seconds per task, tasks per second, and the ratio to the
baseline (median time, and throughput). Figures are printed, not asserted.

Usage: uv run python bench/docker_env.py [--n 100] [--concurrency 1 8] [--rounds 5] [--variants ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from agentcompass.runtime.types import EnvironmentSpec
from agentcompass_docker.provider import DockerProvider
from python_on_whales import docker

IMAGE = "python:3.11-slim"
PAYLOAD = "x" * 1024


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
    """The provider workload; set up once, run in rounds."""

    def __init__(self, run_id: str, gateway: str | None, **options: str) -> None:
        self.run_id, self.gateway = run_id, gateway
        self.provider = DockerProvider(**options)
        self.spec = EnvironmentSpec(image=IMAGE)

    async def setup(self) -> None:
        await self.provider.setup([self.spec], run_id=self.run_id)
        if self.gateway:
            self.provider.gateway_address(host="127.0.0.1", port=8765, unix_socket=self.gateway)

    async def task(self, i: int) -> None:
        session = await self.provider.open(self.spec, run_id=self.run_id, task_id=f"t{i}", base_env={})
        try:
            result = await session.exec(["true"])
            assert result.returncode == 0, result
            await session.write_text("data.txt", PAYLOAD)
            assert await session.read_text("data.txt") == PAYLOAD
        finally:
            await self.provider.close(session)

    async def teardown(self) -> None:
        await self.provider.teardown()


class BaselineVariant:
    """``docker run --rm`` doing the same work in one container."""

    def __init__(self, concurrency: int) -> None:
        self.pool = ThreadPoolExecutor(max(concurrency, 4))
        self.script = f"true && printf %s '{PAYLOAD}' > /tmp/data.txt && cat /tmp/data.txt"

    async def setup(self) -> None:
        pass

    def blocking(self) -> None:
        out = docker.container.run(IMAGE, ["sh", "-c", self.script], remove=True, networks=["none"], pull="never")
        assert out == PAYLOAD, out[:100]

    async def task(self, i: int) -> None:
        await asyncio.get_running_loop().run_in_executor(self.pool, self.blocking)

    async def teardown(self) -> None:
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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["default", "no-batching", "gateway"],
        choices=["default", "no-batching", "gateway"],
    )
    args = parser.parse_args()
    try:
        docker.system.info()
    except Exception as exc:
        sys.exit(f"no Docker engine: {exc}")
    socket_dir = tempfile.mkdtemp(prefix="agentcompass-bench-")
    os.chmod(socket_dir, 0o755)
    try:
        await measure(args, serve_dummy_socket(socket_dir))
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


async def measure(args: argparse.Namespace, gateway_socket: str) -> None:
    per_round = max(1, args.n // args.rounds)
    print(
        f"docker environment bench: {per_round * args.rounds} tasks per cell in {args.rounds} interleaved rounds, "
        f"image {IMAGE}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    header = ("variant", "conc", "median s", "p95 s", "tasks/s", "× base (median)", "× base (tps)")
    print("{:<13}{:>5}{:>10}{:>9}{:>9}{:>17}{:>14}".format(*header))
    for concurrency in args.concurrency:
        variants: dict[str, ProviderVariant | BaselineVariant] = {"docker run": BaselineVariant(concurrency)}
        for name in args.variants:
            options = {"write_delay": "0"} if name == "no-batching" else {}
            gateway = gateway_socket if name == "gateway" else None
            variants[name] = ProviderVariant(f"bench-{name}-{concurrency}-{os.getpid()}", gateway, **options)
        durations: dict[str, list[float]] = {name: [] for name in variants}
        walls = dict.fromkeys(variants, 0.0)
        try:
            for variant in variants.values():
                await variant.setup()
            for _ in range(args.rounds):  # interleaved, so a change in the machine's load hits all alike
                for name, variant in variants.items():
                    got, wall = await timed_tasks(per_round, concurrency, variant.task)
                    durations[name] += got
                    walls[name] += wall
        finally:
            for variant in variants.values():
                await variant.teardown()
        base = describe(durations["docker run"], walls["docker run"])
        for name in variants:
            got = describe(durations[name], walls[name])
            print(
                f"{name:<13}{concurrency:>5}{got['median']:>10.3f}{got['p95']:>9.3f}{got['tps']:>9.2f}"
                f"{got['median'] / base['median']:>17.2f}{base['tps'] / got['tps']:>14.2f}"
            )


if __name__ == "__main__":
    asyncio.run(main())
