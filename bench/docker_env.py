"""Per-task cost of the ``docker`` environment against plain ``docker run --rm``, on this machine's engine.

Workload per task, through the provider: open a container → exec ``true`` → write a file → read it back →
close. Baseline per task: ``docker run --rm --network none python:3.11-slim sh -c 'true; write; read'``
(one container doing the same work, driven through python-on-whales as well). Each at concurrency 1 and 8.

Prints, per variant and concurrency: median and p95 seconds per task, tasks per second, and the ratio to
the baseline (median time and throughput). Variants: ``default`` (small writes batched into the next
call), ``no-batching`` (``write_delay=0``: every write is its own docker call), ``gateway`` (default plus a
model-gateway socket, so every container also starts the forwarder). Figures are printed, not asserted.

Usage: uv run python bench/docker_env.py [--n 100] [--concurrency 1 8] [--variants default no-batching]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from python_on_whales import docker

from agentcompass.runtime.types import EnvironmentSpec
from agentcompass_docker.provider import DockerProvider

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


async def run_provider(n: int, concurrency: int, run_id: str, gateway: str | None, **options: str):
    provider = DockerProvider(**options)
    spec = EnvironmentSpec(image=IMAGE)
    await provider.setup([spec], run_id=run_id)
    if gateway:
        provider.gateway_address(host="127.0.0.1", port=8765, unix_socket=gateway)

    async def task(i: int) -> None:
        session = await provider.open(spec, run_id=run_id, task_id=f"t{i}", base_env={})
        try:
            result = await session.exec(["true"])
            assert result.returncode == 0, result
            await session.write_text("data.txt", PAYLOAD)
            assert await session.read_text("data.txt") == PAYLOAD
        finally:
            await provider.close(session)

    try:
        return await timed_tasks(n, concurrency, task)
    finally:
        await provider.teardown()


async def run_baseline(n: int, concurrency: int):
    pool = ThreadPoolExecutor(max(concurrency, 4))
    loop = asyncio.get_running_loop()
    script = f"true && printf %s '{PAYLOAD}' > /tmp/data.txt && cat /tmp/data.txt"

    def blocking() -> None:
        out = docker.container.run(IMAGE, ["sh", "-c", script], remove=True, networks=["none"], pull="never")
        assert out == PAYLOAD, out[:100]

    async def task(i: int) -> None:
        await loop.run_in_executor(pool, blocking)

    try:
        return await timed_tasks(n, concurrency, task)
    finally:
        pool.shutdown()


def describe(durations: list[float], wall: float) -> dict[str, float]:
    ordered = sorted(durations)
    return {
        "median": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))],
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
    parser.add_argument(
        "--variants", nargs="+", default=["default", "no-batching", "gateway"],
        choices=["default", "no-batching", "gateway"],
    )
    args = parser.parse_args()
    try:
        docker.system.info()
    except Exception as exc:  # noqa: BLE001
        sys.exit(f"no Docker engine: {exc}")
    socket_dir = tempfile.mkdtemp(prefix="agentcompass-bench-")
    os.chmod(socket_dir, 0o755)
    gateway_socket = serve_dummy_socket(socket_dir)
    print(f"docker environment bench: {args.n} tasks per cell, image {IMAGE}, {os.cpu_count()} CPUs")
    print(f"{'variant':<13}{'conc':>5}{'median s':>10}{'p95 s':>9}{'tasks/s':>9}{'× base (median)':>17}{'× base (tps)':>14}")
    for concurrency in args.concurrency:
        base = describe(*await run_baseline(args.n, concurrency))
        print(f"{'docker run':<13}{concurrency:>5}{base['median']:>10.3f}{base['p95']:>9.3f}{base['tps']:>9.2f}"
              f"{1.0:>17.2f}{1.0:>14.2f}")
        for variant in args.variants:
            options = {"write_delay": "0"} if variant == "no-batching" else {}
            gateway = gateway_socket if variant == "gateway" else None
            run_id = f"bench-{variant}-{concurrency}-{os.getpid()}"
            got = describe(*await run_provider(args.n, concurrency, run_id, gateway, **options))
            print(f"{variant:<13}{concurrency:>5}{got['median']:>10.3f}{got['p95']:>9.3f}{got['tps']:>9.2f}"
                  f"{got['median'] / base['median']:>17.2f}{base['tps'] / got['tps']:>14.2f}")


if __name__ == "__main__":
    asyncio.run(main())
