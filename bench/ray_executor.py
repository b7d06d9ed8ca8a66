"""``--executor ray`` against the local executor, through the real CLI, on a local two-node Ray cluster.

Workload: N mock tasks (default 2,000) of a benchmark whose run phase calls the agent model K=3 times through
the in-process client (``mock`` provider), in the ``local`` environment; results, trajectories and logs written
to a real run directory on the head. The benchmark is an installed plugin (a ``.dist-info`` on PYTHONPATH) on
the driver and on both nodes, as a real cluster needs.

The cluster: a head on 127.0.0.2 and a worker on 127.0.0.3 (64 logical CPUs each, so concurrency 100 fits
with the default ``num_cpus=1`` per attempt), each its own ``ray start --block`` process tree, stopped by pid.

Prints, per executor (each case repeated ``--repeat`` times; the range is shown):
  * 0 ms model latency, concurrency 8 and 100: run time (``summary.duration_s``: from the first attempt to the
    last record; joining the cluster and starting the workers come before it and are shown apart), tasks/s,
    and ms per task (run time ÷ N); the ray executor's overhead per task is its ms per task minus the local
    executor's (target ≤ 10 ms);
  * 100 ms model latency, concurrency 100: run time ÷ ideal, ideal = N·K·latency ÷ concurrency (target ≤ 1.3);
  * per protocol (Anthropic Messages, Responses, chat completions, each passed through to a loopback provider
    of its protocol): the time to first token of a streamed call made at a worker's relay gateway (node → head
    over the worker's WebSocket, served by the head's gateway) minus the same call made at the head's gateway
    directly; median of ``--ttft-calls`` calls (target ≤ 5 ms). Measured in one process over loopback (the
    transport itself; no Ray cluster);
  * scaling (a cluster of its own: a head that runs no attempt, worker nodes of ``--per-node`` CPUs, so each
    holds that many attempts at once): ``--scaling-n`` tasks at 1 s model latency and concurrency 2·per-node, on
    one worker node, then on two; the two-node run time ÷ the one-node run time (target ≤ 0.55, ideal 0.5);
  * images (``--only images``; root, ``dockerd`` and Debian's ``docker-registry``): ``--images-n`` harbor tasks
    (default 100) whose Dockerfiles make ``--images-distinct`` different images (default 10), oracle agent,
    ``--env docker -c 4``, on two docker nodes each with a Docker engine of its own (a ``dockerd`` each, as the
    tests start them), without then with ``--executor-arg registry=`` (a registry on loopback): the images
    built and pulled on each node's engine and the run's wall time.

Usage: uv run python bench/ray_executor.py [--n 2000] [--repeat 2]
       [--only overhead|latency|ttft|scaling|images] [--ttft-calls 50] [--scaling-n 32] [--per-node 4]
       [--images-n 100] [--images-distinct 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers.ray_cluster import LocalCluster  # noqa: E402

K = 3
PLUGIN = '''
from dataclasses import replace

from agentcompass import hookimpl
from agentcompass.runtime import HarnessFreeBenchmark, RunResult, TaskSpec, TaskStatus


class CallsBenchmark(HarnessFreeBenchmark):
    def __init__(self, n="1000"):
        super().__init__()
        self.n = int(n)

    def load_tasks(self, req):
        return (TaskSpec(task_id=f"task-{i}", category=("a", "b")[i % 2]) for i in range(self.n))

    async def run_task(self, task, prepared, req, plan, env=None):
        messages = [{"role": "user", "content": f"question {task.task_id}"}]
        for _ in range(3):
            reply = await plan.models["agent"].chat(messages)
            messages.append(dict(reply.message))
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         final_answer=messages[-1]["content"])

    async def evaluate(self, task, prepared, result, req, plan, env=None):
        return replace(result, metrics={"score": 1.0})


@hookimpl
def register_benchmarks(register):
    register("bench_ray_calls", CallsBenchmark)
'''


def install_plugin(root: Path) -> Path:
    """The benchmark as an installed distribution: a package and its .dist-info, on a PYTHONPATH entry."""
    site = root / "site"
    (site / "acbench_ray").mkdir(parents=True)
    (site / "acbench_ray" / "__init__.py").write_text(PLUGIN)
    info = site / "acbench_ray-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acbench-ray\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text("[agentcompass]\nbench_ray = acbench_ray\n")
    return site


def run(n: int, concurrency: int, latency: float, env: dict[str, str], extra: list[str], out: Path
        ) -> tuple[float, float]:
    """(run time from summary.json, whole-process wall time) of one ``agentcompass run``."""
    argv = [sys.executable, "-m", "agentcompass.cli.main", "run", "bench_ray_calls", "none", "mock",
            "-b", f"n={n}", "-c", str(concurrency), "-o", str(out), "--json", *extra]
    if latency:
        argv += ["--model-arg", f"latency={latency}"]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}): {proc.stderr[-3000:]}")
    summary = json.loads(proc.stdout)
    assert summary["status_counts"] == {"COMPLETED": n}, summary["status_counts"]
    return float(summary["duration_s"]), wall


def span(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    lo, hi = min(values) * scale, max(values) * scale
    return f"{lo:.{digits}f}" if round(lo, digits) == round(hi, digits) else f"{lo:.{digits}f}–{hi:.{digits}f}"


async def ttft_ms(base_url: str, token: str, protocol: str, calls: int) -> list[float]:
    """Times (ms) from sending a streamed call to its first answer event."""
    import aiohttp

    paths = {"anthropic": "/messages", "responses": "/responses", "chat": "/chat/completions"}
    bodies = {"anthropic": {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]},
              "responses": {"model": "m", "input": "hi"},
              "chat": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}
    headers = {"Authorization": f"Bearer {token}", "x-api-key": token, "anthropic-version": "2023-06-01"}
    marks = {"anthropic": b"text_delta", "responses": b"output_text.delta", "chat": b'"content"'}
    times = []
    async with aiohttp.ClientSession() as http:
        for _ in range(calls):
            started = time.perf_counter()
            async with http.post(base_url + paths[protocol], json={**bodies[protocol], "stream": True},
                                 headers=headers) as r:
                seen = b""
                while marks[protocol] not in seen:
                    chunk = await r.content.readany()
                    assert chunk, seen
                    seen += chunk
                times.append((time.perf_counter() - started) * 1000)
                await r.read()
    return times


async def ttft_case(calls: int) -> None:
    import statistics

    from agentcompass.models.gateway import ModelGateway
    from agentcompass.models.metering import TaskMeter
    from agentcompass.runtime.model_providers import ProviderSettings
    from agentcompass.testing.upstream import LoopbackUpstream
    from agentcompass_models.anthropic import make_anthropic
    from agentcompass_models.openai import make_openai

    from tests.helpers.relayed_gateway import RelayedGateway

    print(f"  time to first token of a streamed call (median of {calls}), passthrough to a loopback provider:")
    for protocol in ("anthropic", "responses", "chat"):
        async with LoopbackUpstream(piece=8) as up:
            def provider(protocol: str = protocol) -> object:
                if protocol == "anthropic":
                    return make_anthropic("up", settings=ProviderSettings(
                        base_url=up.root, max_retries=0, environ={"ANTHROPIC_API_KEY": up.api_key}))
                return make_openai("up", settings=ProviderSettings(base_url=up.base_url, max_retries=0,
                                                                   environ={"OPENAI_API_KEY": up.api_key}))

            local = ModelGateway({"agent": "up"})
            await local.start()
            relayed = await RelayedGateway.start({"agent": "up"})
            lp, rp = provider(), provider()
            try:
                token, _ = local.grant({"agent": lp}, TaskMeter("t", 1), local.base_url)  # type: ignore[dict-item]
                rtoken, _ = relayed.grant({"agent": rp}, TaskMeter("t", 1))  # type: ignore[dict-item]
                await ttft_ms(local.base_url, token, protocol, 5)  # warm both paths
                await ttft_ms(relayed.base_url, rtoken, protocol, 5)
                here = statistics.median(await ttft_ms(local.base_url, token, protocol, calls))
                there = statistics.median(await ttft_ms(relayed.base_url, rtoken, protocol, calls))
            finally:
                await lp.aclose()  # type: ignore[attr-defined]
                await rp.aclose()  # type: ignore[attr-defined]
                await relayed.stop()
                await local.stop()
        print(f"    {protocol:>9}: local {here:.2f} ms, from a node {there:.2f} ms → added {there - here:.2f} ms"
              "  (target ≤ 5 ms)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", choices=("overhead", "latency", "ttft", "scaling", "images"), default=None,
                        help="run one of the cases")
    parser.add_argument("--ttft-calls", type=int, default=50)
    parser.add_argument("--scaling-n", type=int, default=32, help="tasks of the scaling case")
    parser.add_argument("--per-node", type=int, default=4, help="attempts a worker node holds at once (scaling)")
    parser.add_argument("--images-n", type=int, default=100, help="tasks of the images case")
    parser.add_argument("--images-distinct", type=int, default=10, help="different task images among them")
    args = parser.parse_args()
    if args.only == "images":
        images(args.images_n, args.images_distinct)
        return
    if args.only in (None, "ttft"):
        import asyncio

        asyncio.run(ttft_case(args.ttft_calls))
        if args.only == "ttft":
            return
    n, repeat = args.n, args.repeat
    root = Path(tempfile.mkdtemp(prefix="acbench", dir="/tmp"))
    site = install_plugin(root)
    pythonpath = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    if args.only == "scaling":
        try:
            scaling(root, pythonpath, args.scaling_n, args.per_node)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    cluster = LocalCluster(env={"PYTHONPATH": pythonpath})
    print(f"--executor ray vs local — N={n} tasks × K={K} in-process mock calls, local environment; "
          f"two-node loopback cluster (head 127.0.0.2, worker 127.0.0.3); {repeat} runs per case")
    try:
        started = time.perf_counter()
        cluster.start_head("127.0.0.2", cpus=64)
        cluster.add_worker("127.0.0.3", cpus=64)
        cluster.wait_for(2)
        print(f"  cluster up in {time.perf_counter() - started:.1f} s")
        local_env = {**os.environ, "PYTHONPATH": pythonpath}
        ray_env = {**local_env, **cluster.driver_env()}
        ray_args = ["--executor", "ray", "--executor-arg", f"address={cluster.address}",
                    "--executor-arg", "node_ip=127.0.0.2"]
        for concurrency in (8, 100) if args.only != "latency" else ():
            times: dict[str, list[float]] = {"local": [], "ray": []}
            walls: dict[str, list[float]] = {"local": [], "ray": []}
            for i in range(repeat):
                for name, env, extra in (("local", local_env, []), ("ray", ray_env, ray_args)):
                    t, wall = run(n, concurrency, 0.0, env, extra, root / f"{name}-{concurrency}-{i}")
                    times[name].append(t)
                    walls[name].append(wall)
            for name in ("local", "ray"):
                print(f"  0 ms latency, concurrency {concurrency:>3}, {name:>5}: run {span(times[name])} s, "
                      f"{span([n / t for t in times[name]], digits=0)} tasks/s, "
                      f"{span(times[name], 1000 / n)} ms per task (whole process {span(walls[name])} s)")
            overhead = [(r - lo) * 1000 / n for r in times["ray"] for lo in times["local"]]
            print(f"  → ray overhead per task at concurrency {concurrency}: {span(overhead)} ms  (target ≤ 10 ms)")
        latency, concurrency = 0.1, 100
        ideal = n * K * latency / concurrency
        executors = (("local", local_env, []), ("ray", ray_env, ray_args))
        for name, env, extra in executors if args.only != "overhead" else ():
            measured = [run(n, concurrency, latency, env, extra, root / f"{name}-latency-{i}")[0]
                        for i in range(repeat)]
            print(f"  100 ms latency, concurrency {concurrency}, {name:>5}: {span(measured)} s measured, "
                  f"{ideal:.2f} s ideal, ratio {span([m / ideal for m in measured], digits=3)}"
                  + ("  (target ≤ 1.3)" if name == "ray" else ""))
    finally:
        cluster.stop()
    try:
        if args.only is None:
            scaling(root, pythonpath, args.scaling_n, args.per_node)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def scaling(root: Path, pythonpath: str, n: int, per_node: int) -> None:
    """Latency-bound: ``n`` tasks, K calls each of 1 s, concurrency 2·per_node, on one worker node then two."""
    latency, concurrency = 1.0, 2 * per_node
    cluster = LocalCluster(env={"PYTHONPATH": pythonpath})
    print(f"scaling — N={n} tasks × K={K} mock calls of {latency:g} s, concurrency {concurrency}; worker nodes "
          f"of {per_node} CPUs (num_cpus=1 an attempt: {per_node} at once each), a head that runs none; "
          f"load before: {os.getloadavg()[0]:.1f}")
    try:
        # Both worker nodes from the start (a node started under load may time out); the one-node run reserves a
        # resource only the first has.
        cluster.start_head("127.0.0.2", cpus=0)
        cluster.add_worker("127.0.0.3", cpus=per_node, resources={"bench": per_node, "bench_first": per_node})
        cluster.add_worker("127.0.0.4", cpus=per_node, resources={"bench": per_node})
        cluster.wait_for(3)
        env = {**os.environ, "PYTHONPATH": pythonpath, **cluster.driver_env()}
        extra = ["--executor", "ray", "--executor-arg", f"address={cluster.address}",
                 "--executor-arg", "node_ip=127.0.0.2"]
        measured = {}
        for nodes, resource in ((1, "bench_first"), (2, "bench")):
            reserve = ["--executor-arg", f'resources={{"{resource}": 1}}']
            run_s, wall = run(n, concurrency, latency, env, [*extra, *reserve], root / f"scaling-{nodes}")
            measured[nodes] = run_s
            ideal = n * K * latency / (per_node * nodes)
            print(f"  {nodes} worker node(s): run {run_s:.2f} s (ideal {ideal:.2f} s), whole process {wall:.2f} s, "
                  f"load {os.getloadavg()[0]:.1f}")
        print(f"  → two nodes ÷ one node: {measured[2] / measured[1]:.3f}  (target ≤ 0.55, ideal 0.5)")
    finally:
        cluster.stop()


def images(n: int, distinct: int) -> None:
    """(c): a docker run on two nodes, each with an engine of its own, without and with a registry."""
    from tests.harbor.taskdirs import write_task
    from tests.helpers.docker_engines import ExtraEngine, Registry, can_run_engines

    why = can_run_engines()
    if why:
        raise SystemExit(f"the images case cannot run here: {why}")
    base, ips = "python:3.11-slim", ("127.0.0.2", "127.0.0.6")
    reward = "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
    root = Path(tempfile.mkdtemp(prefix="acbench-images", dir="/tmp"))
    engines: list[ExtraEngine] = []
    cluster = LocalCluster()
    print(f"images — {n} harbor tasks ({distinct} different task images), oracle, --env docker -c 4; two docker "
          f"nodes ({ips[0]} the head, {ips[1]}), each with a dockerd of its own; load before: "
          f"{os.getloadavg()[0]:.1f}")
    try:
        for name in ("a", "b"):
            engines.append(ExtraEngine.start(name))
            engines[-1].load(base)
        cluster.start_head(ips[0], cpus=2, resources={"docker": 2}, env={"DOCKER_HOST": engines[0].host})
        cluster.wait_for(1, timeout=600)
        cluster.add_worker(ips[1], cpus=2, resources={"docker": 2}, env={"DOCKER_HOST": engines[1].host})
        cluster.wait_for(2, timeout=600)
        for shared in (False, True):
            registry = Registry.start() if shared else None
            label = "with registry=" if registry else "without a registry"
            nonce = f"{time.time_ns()}"  # images no engine has yet
            tasks = root / f"tasks-{nonce}"
            for i in range(n):
                write_task(tasks, f"t{i:03d}", instruction="write hi", test="test -f /app/hi\n" + reward,
                           solve="touch /app/hi\n",
                           dockerfile=f"FROM {base}\nRUN echo {nonce}-{i % distinct} > /nonce\nWORKDIR /app\n")
            before = [e.images("agentcompass-build") for e in engines]
            since = time.time() - 1
            extra = ["--executor-arg", f"registry={registry.address}"] if registry else []
            started = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "agentcompass.cli.main", "run", "harbor", "oracle", "mock", "-b",
                 f"path={tasks}", "--env", "docker", "-c", "4", "--executor", "ray", "--executor-arg",
                 f"address={cluster.address}", "--executor-arg", f"node_ip={ips[0]}", *extra, "-o",
                 str(root / f"run-{nonce}")], cwd=ROOT, capture_output=True, text=True,
                env={**os.environ, **cluster.driver_env()}, timeout=3600)
            wall = time.perf_counter() - started
            if registry:
                registry.stop()
            if proc.returncode != 0:
                print(f"  {label}: the run failed ({proc.returncode}): {proc.stderr[-1500:]}")
                continue
            summary = json.loads((root / f"run-{nonce}" / "summary.json").read_text())
            per_node = []
            for ip, engine, had in zip(ips, engines, before, strict=True):
                actions = engine.docker("events", "--since", f"{since:.0f}", "--until", f"{time.time() + 1:.0f}",
                                        "--filter", "type=image", "--format", "{{.Action}}").stdout.split()
                made = len(engine.images("agentcompass-build") - had)
                pulled = actions.count("pull")
                per_node.append(f"{ip}: {made - pulled} built, {pulled} pulled, {actions.count('push')} pushed")
            print(f"  {label}: wall {wall:.1f} s (run {summary.get('duration_s', 0):.1f} s), "
                  f"{summary.get('status_counts')}; " + "; ".join(per_node) + f"; load {os.getloadavg()[0]:.1f}")
    finally:
        cluster.stop()
        for engine in engines:
            engine.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
