"""Conformance checks: the contract rules a plugin must keep, each one awaitable line in a test.

Every check is a plain async function that raises :class:`AssertionError` with a message saying which rule
was broken and how; it returns ``None`` when the plugin conforms. Benchmark checks run the benchmark's phases
in a real session (``local`` unless ``environment=`` or ``env=`` says otherwise)::

    await check_benchmark(MyBenchmark())                    # all of the benchmark checks
    await check_prepare_idempotent(MyBenchmark(), task)     # or one at a time
    await check_environment_provider("my_env")              # all of the environment checks
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from agentcompass.runtime.benchmark import BaseBenchmark, HarnessFreeBenchmark
from agentcompass.runtime.environment import EnvironmentSession
from agentcompass.runtime.types import (
    EnvironmentSpec,
    ExecutionPlan,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.testing.sessions import TEST_RUN_ID, environment_sessions, open_session

#: The error every deliberately failed result carries.
DELIBERATE_ERROR = "agentcompass.testing: a deliberate failure of an earlier phase"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1]}" if text else type(exc).__name__


# -- benchmark checks ----------------------------------------------------------------------------------


def _instance(benchmark: Any) -> BaseBenchmark:
    if isinstance(benchmark, type) and issubclass(benchmark, BaseBenchmark):
        benchmark = benchmark()
    if not isinstance(benchmark, BaseBenchmark):
        raise TypeError(f"not a benchmark: {benchmark!r}")
    return benchmark


def default_request(benchmark: BaseBenchmark, **fields: Any) -> RunRequest:
    """The request the checks use: the benchmark's name, ``none`` or ``nop``, the ``mock`` model."""
    harness = "none" if isinstance(benchmark, HarnessFreeBenchmark) else "nop"
    return RunRequest(benchmark=benchmark.name or type(benchmark).__name__, harness=harness, model="mock",
                      **fields)


async def first_task(benchmark: BaseBenchmark, request: RunRequest) -> TaskSpec:
    """The benchmark's first task (``load_tasks`` may be sync, async, or an async generator)."""
    loaded: Any = benchmark.load_tasks(request)
    if inspect.isawaitable(loaded):
        loaded = await loaded
    if hasattr(loaded, "__aiter__"):
        async for task in loaded:
            return task
    else:
        for task in loaded:
            return task
    raise AssertionError(f"{type(benchmark).__name__}.load_tasks yielded no task to check")


class _Context:
    """What a benchmark check needs: the benchmark, a task, a request, a plan and (maybe) a session."""

    def __init__(self, benchmark: BaseBenchmark, task: TaskSpec, request: RunRequest, plan: ExecutionPlan,
                 env: EnvironmentSession) -> None:
        self.benchmark, self.task, self.request, self.plan, self.env = benchmark, task, request, plan, env
        self.name = type(benchmark).__name__

    async def prepare(self) -> PreparedTask:
        try:
            prepared = await self.benchmark.prepare_task(self.task, self.request, self.plan, self.env)
        except Exception as exc:
            raise AssertionError(
                f"{self.name}.prepare_task failed on task {self.task.task_id!r}: {_describe(exc)}"
            ) from exc
        if not isinstance(prepared, PreparedTask):
            raise AssertionError(f"{self.name}.prepare_task returned {type(prepared).__name__}, not PreparedTask")
        return prepared

    def failed(self, status: TaskStatus = TaskStatus.RUN_ERROR) -> RunResult:
        return RunResult(task_id=self.task.task_id, category=self.task.category, status=status,
                         error=DELIBERATE_ERROR, error_phase="run")

    def completed(self) -> RunResult:
        return RunResult(task_id=self.task.task_id, category=self.task.category, status=TaskStatus.COMPLETED)

    @property
    def evaluation_env(self) -> EnvironmentSession | None:
        return None if self.benchmark.evaluation_environment_mode == "none" else self.env


@contextlib.asynccontextmanager
async def _benchmark_context(benchmark: Any, task: TaskSpec | None, *, env: EnvironmentSession | None,
                             request: RunRequest | None, plan: ExecutionPlan | None, environment: Any,
                             host: Any) -> AsyncIterator[_Context]:
    bench = _instance(benchmark)
    request = request or default_request(bench)
    task = task or await first_task(bench, request)
    artifacts = tempfile.mkdtemp(prefix="agentcompass-check-artifacts-")
    plan = plan or ExecutionPlan(run_id=TEST_RUN_ID, task_id=task.task_id, harness=request.harness,
                                 environment=environment if isinstance(environment, str) else "test",
                                 artifacts_dir=artifacts)
    try:
        if env is not None:
            yield _Context(bench, task, request, plan, env)
        else:
            async with open_session(environment, spec=bench.environment_spec(task, request), host=host,
                                    task_id=task.task_id) as session:
                yield _Context(bench, task, request, plan, session)
    finally:
        shutil.rmtree(artifacts, ignore_errors=True)


async def check_prepare_idempotent(
    benchmark: Any, task: TaskSpec | None = None, *, env: EnvironmentSession | None = None,
    request: RunRequest | None = None, plan: ExecutionPlan | None = None, environment: Any = "local",
    host: Any = None,
) -> None:
    """``prepare_task`` may run twice in one environment (a retry does that): the second call must not fail,
    must return an equal :class:`PreparedTask`, and (where the working directory is visible on the host)
    must leave the same files with the same contents."""
    async with _benchmark_context(benchmark, task, env=env, request=request, plan=plan, environment=environment,
                                  host=host) as ctx:
        first = await ctx.prepare()
        host_dir = await host_workdir(ctx.env)
        before = _snapshot(host_dir) if host_dir is not None else None
        try:
            second = await ctx.benchmark.prepare_task(ctx.task, ctx.request, ctx.plan, ctx.env)
        except Exception as exc:
            raise AssertionError(
                f"{ctx.name}.prepare_task is not idempotent: called a second time in the same environment (as "
                f"a retry does) on task {ctx.task.task_id!r}, it raised {_describe(exc)}"
            ) from exc
        if second != first:
            raise AssertionError(
                f"{ctx.name}.prepare_task is not idempotent: the second call on task {ctx.task.task_id!r} "
                f"returned a different PreparedTask\n  first:  {first!r}\n  second: {second!r}"
            )
        if host_dir is not None and before is not None:
            after = _snapshot(host_dir)
            changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
            if changed:
                raise AssertionError(
                    f"{ctx.name}.prepare_task is not idempotent: the second call on task {ctx.task.task_id!r} "
                    f"changed files of the environment: {', '.join(changed[:10])}"
                )


async def check_evaluate_keeps_error(
    benchmark: Any, task: TaskSpec | None = None, *, env: EnvironmentSession | None = None,
    request: RunRequest | None = None, plan: ExecutionPlan | None = None, environment: Any = "local",
    host: Any = None, statuses: Sequence[TaskStatus] = (TaskStatus.RUN_ERROR,),
) -> None:
    """``evaluate`` given a result that is not ``COMPLETED`` (a ``RUN_ERROR`` by default) returns it with
    its status and error kept: a crash of the run is never hidden by scoring."""
    async with _benchmark_context(benchmark, task, env=env, request=request, plan=plan, environment=environment,
                                  host=host) as ctx:
        prepared = await ctx.prepare()
        for status in statuses:
            failed = ctx.failed(status)
            try:
                out = await ctx.benchmark.evaluate(ctx.task, prepared, failed, ctx.request, ctx.plan,
                                                   ctx.evaluation_env)
            except Exception as exc:
                raise AssertionError(
                    f"{ctx.name}.evaluate raised on a {status.value} result instead of returning it with its "
                    f"error: {_describe(exc)}"
                ) from exc
            if not isinstance(out, RunResult):
                raise AssertionError(f"{ctx.name}.evaluate returned {type(out).__name__}, not RunResult")
            if out.status is not status or out.error != failed.error:
                raise AssertionError(
                    f"{ctx.name}.evaluate overwrote an earlier error: given status={status.value} "
                    f"error={failed.error!r}, it returned status={out.status.value} error={out.error!r}. "
                    "Return a result that is not COMPLETED with its status and error (e.g. "
                    "dataclasses.replace(result, metrics={}))"
                )


async def check_collect_does_not_score(
    benchmark: Any, task: TaskSpec | None = None, *, env: EnvironmentSession | None = None,
    request: RunRequest | None = None, plan: ExecutionPlan | None = None, environment: Any = "local",
    host: Any = None, result: RunResult | None = None,
) -> None:
    """``collect_artifacts`` extracts, never scores: the metrics it returns are the ones it was given (none),
    and a failed result keeps its status and error. ``result`` is the completed run result to collect from
    (default: a bare ``COMPLETED`` one, as after a harness that did nothing)."""
    async with _benchmark_context(benchmark, task, env=env, request=request, plan=plan, environment=environment,
                                  host=host) as ctx:
        prepared = await ctx.prepare()
        for given in (result or ctx.completed(), ctx.failed()):
            try:
                out = await ctx.benchmark.collect_artifacts(ctx.task, prepared, given, ctx.request, ctx.plan,
                                                            ctx.env)
            except Exception as exc:
                hint = "" if result is not None else "; pass result= with a realistic run result"
                raise AssertionError(
                    f"{ctx.name}.collect_artifacts raised on a {given.status.value} result: {_describe(exc)}{hint}"
                ) from exc
            if not isinstance(out, RunResult):
                raise AssertionError(f"{ctx.name}.collect_artifacts returned {type(out).__name__}, not RunResult")
            if dict(out.metrics) != dict(given.metrics):
                raise AssertionError(
                    f"{ctx.name}.collect_artifacts scored: given metrics {dict(given.metrics)}, it returned "
                    f"{dict(out.metrics)}. Scoring belongs in evaluate"
                )
            if given.status is not TaskStatus.COMPLETED and (out.status is not given.status
                                                              or out.error != given.error):
                raise AssertionError(
                    f"{ctx.name}.collect_artifacts overwrote an earlier error: given status={given.status.value} "
                    f"error={given.error!r}, it returned status={out.status.value} error={out.error!r}"
                )


async def check_benchmark(
    benchmark: Any, task: TaskSpec | None = None, *, environment: Any = "local", host: Any = None,
    request: RunRequest | None = None, result: RunResult | None = None,
) -> None:
    """Every benchmark check on one task (default: the first), each in a fresh session of ``environment``
    (one provider serves them all, so an instance is fine too)."""
    bench = _instance(benchmark)
    request = request or default_request(bench)
    task = task or await first_task(bench, request)
    spec = bench.environment_spec(task, request)
    async with environment_sessions(environment, specs=[spec], host=host) as sessions:
        common: dict[str, Any] = {"request": request}
        await check_prepare_idempotent(bench, task, env=await sessions.open(spec, task_id=task.task_id), **common)
        await check_collect_does_not_score(bench, task, result=result,
                                           env=await sessions.open(spec, task_id=task.task_id), **common)
        await check_evaluate_keeps_error(bench, task, env=await sessions.open(spec, task_id=task.task_id), **common)


# -- environment checks --------------------------------------------------------------------------------


async def host_workdir(env: EnvironmentSession) -> Path | None:
    """The session's working directory as a host path, when the session writes straight to the host's file
    system (``local``); ``None`` otherwise (a container)."""
    workdir = Path(env.workdir)
    if not workdir.is_absolute() or not await asyncio.to_thread(workdir.is_dir):
        return None
    probe = f".agentcompass-probe-{secrets.token_hex(6)}"
    token = secrets.token_hex(8)
    try:
        await env.write_text(probe, token)
    except Exception:
        return None
    path = workdir / probe
    try:
        if path.read_text() == token:
            return workdir
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
    with contextlib.suppress(Exception):
        await env.exec(["rm", "-f", probe], timeout=30)
    return None


def _snapshot(root: Path, limit: int = 20_000) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, path in enumerate(sorted(root.rglob("*"))):
        if i >= limit:
            break
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


_ALIVE_SCRIPT = """
for p in {pids}; do
  if [ -r /proc/$p/stat ]; then
    state=$(cut -d')' -f2 < /proc/$p/stat | cut -c2)
    [ "$state" = Z ] || [ -z "$state" ] || echo $p
  elif kill -0 $p 2>/dev/null; then
    echo $p
  fi
done
"""


def _alive_on_host(pid: int, marker: bytes) -> bool:
    """Is ``pid`` a live (not zombie) process of the host whose command line holds ``marker``? The command
    line is compared so that a recycled pid never counts."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[:1]
    return marker in cmdline and state != ["Z"]


async def _alive(env: EnvironmentSession, pids: dict[int, bytes], on_host: bool) -> list[int]:
    if on_host and await asyncio.to_thread(Path("/proc").is_dir):
        return [p for p, marker in pids.items() if _alive_on_host(p, marker)]
    result = await env.exec(["sh", "-c", _ALIVE_SCRIPT.format(pids=" ".join(map(str, pids)))], timeout=30)
    return [int(p) for p in result.stdout.split() if p.isdigit()]


async def check_exec_timeout_kills_tree(
    env: EnvironmentSession, *, detached: bool = False, timeout: float = 1.0, slack: float = 10.0,
    grace: float = 5.0, seconds: int = 300,
) -> None:
    """``exec(..., timeout=)`` on expiry kills the whole process tree and reports ``timed_out`` promptly.

    The command is ``sh -c "sleep 300 & echo $$ $! > FILE; exec sleep 300"``; with ``detached`` the background
    child starts a session of its own (``setsid sleep 300``), which a kill of the process group alone misses.
    After the timeout both sleepers must be gone (or zombies) within ``grace`` seconds: checked on the host
    (``/proc``, by pid and command line) when the session runs on the host, else by an ``exec`` inside the
    environment. Whatever the outcome, the check kills what it started.
    """
    name = f"agentcompass-check-{secrets.token_hex(4)}.pids"
    sleep = f"sleep {int(seconds)}"
    child = f"setsid {sleep}" if detached else sleep
    on_host = await host_workdir(env) is not None
    started = time.monotonic()
    result = await env.exec(["sh", "-c", f"{child} & echo $$ $! > {name}; exec {sleep}"], timeout=timeout)
    elapsed = time.monotonic() - started
    pids: dict[int, bytes] = {}
    try:
        if not result.timed_out:
            raise AssertionError(
                f"exec(timeout={timeout}) of a command sleeping {seconds} s did not report timed_out "
                f"(returncode={result.returncode}, stderr={result.stderr.strip()[-200:]!r})"
            )
        if elapsed > timeout + slack:
            raise AssertionError(f"exec(timeout={timeout}) returned only after {elapsed:.1f} s")
        try:
            marker = sleep.replace(" ", "\x00").encode()
            pids = {int(p): marker for p in (await env.read_text(name)).split()}
        except Exception as exc:
            raise AssertionError(f"the command's pid file {name} is unreadable: {_describe(exc)}") from exc
        deadline = time.monotonic() + grace
        alive = await _alive(env, pids, on_host)
        while alive and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            alive = await _alive(env, pids, on_host)
        if alive:
            what = "in a session of its own (setsid) " if detached else ""
            raise AssertionError(
                f"process(es) {alive} of a timed-out exec {what}survived {grace} s after the timeout: "
                "a timeout must kill the whole process tree"
            )
    finally:
        if pids:  # never leave a sleeper behind, whatever the outcome
            if on_host:
                for pid, marker in pids.items():
                    if _alive_on_host(pid, marker):
                        with contextlib.suppress(OSError):
                            os.kill(pid, 9)
                for _ in range(50):  # until the kernel has ended them
                    if not any(_alive_on_host(pid, marker) for pid, marker in pids.items()):
                        break
                    await asyncio.sleep(0.05)
            else:
                with contextlib.suppress(Exception):
                    await env.exec(["kill", "-9", *map(str, pids)], timeout=30)
        with contextlib.suppress(Exception):
            await env.exec(["rm", "-f", name], timeout=30)


async def _raises(call: Any) -> BaseException | None:
    try:
        await call
    except Exception as exc:
        return exc
    return None


async def check_paths_confined(env: EnvironmentSession) -> None:
    """Paths given to the session stay inside the environment: writing or reading ``../x``, an absolute path
    outside the working directory, or through a symlink pointing out, either raises or (a container) acts
    inside the environment — it never touches the host outside the working directory."""
    token = secrets.token_hex(8)
    host_dir = await host_workdir(env)
    workdir = host_dir or Path(env.workdir)
    outside = Path(tempfile.mkdtemp(prefix="agentcompass-outside-"))
    bait_dir = host_dir.parent if host_dir is not None else None
    bait = f"agentcompass-bait-{token}.txt"
    link = f"agentcompass-link-{token}"
    created: list[Path] = [outside]
    try:
        (outside / "secret.txt").write_text(token)
        if bait_dir is not None:
            (bait_dir / bait).write_text(token)
            created.append(bait_dir / bait)
        await env.exec(["ln", "-s", str(outside), link], timeout=30)

        writes = {
            f"../agentcompass-escape-{token}.txt": workdir.parent / f"agentcompass-escape-{token}.txt",
            str(outside / "written.txt"): outside / "written.txt",
            f"{link}/via-link.txt": outside / "via-link.txt",
        }
        created.extend(writes.values())
        for path, host_target in writes.items():
            error = await _raises(env.write_text(path, token))
            if host_target.exists() and host_target.read_text(errors="replace") == token:
                raise AssertionError(
                    f"write_text({path!r}) wrote {host_target} on the host, outside the working directory"
                )
            if error is None:
                back = await _raises(env.read_text(path))
                if back is not None:
                    raise AssertionError(f"write_text({path!r}) reported success, but reading it back raised "
                                         f"{_describe(back)}")
                if host_dir is not None:
                    raise AssertionError(
                        f"write_text({path!r}) accepted a path leading outside the working directory; on the host "
                        "file system that must raise"
                    )

        reads = [str(outside / "secret.txt"), f"{link}/secret.txt"]
        if bait_dir is not None:
            reads.append(f"../{bait}")
        for read in reads:
            try:
                content = await env.read_text(read)
            except Exception:
                continue
            if content == token:
                raise AssertionError(f"read_text({read!r}) read a host file outside the working directory")
        if bait_dir is not None:
            local = outside / "downloaded.txt"
            error = await _raises(env.download(f"../{bait}", local))
            if error is None and local.exists() and local.read_text() == token:
                raise AssertionError(f"download('../{bait}') copied a host file from outside the working directory")
    finally:
        for leftover in created:
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    leftover.unlink()
        with contextlib.suppress(Exception):
            await env.exec(["rm", "-f", link], timeout=30)


async def check_exec_in_workdir(env: EnvironmentSession) -> None:
    """``exec`` runs in the working directory, and relative paths of file calls resolve against it."""
    name = f"agentcompass-check-{secrets.token_hex(4)}.txt"
    token = secrets.token_hex(8)
    await env.write_text(name, token)
    try:
        result = await env.exec(["cat", name], timeout=30)
        if result.returncode != 0 or result.stdout.strip() != token:
            raise AssertionError(f"exec(['cat', {name!r}]) did not read the file write_text({name!r}) wrote: "
                                 f"exec does not run in the working directory ({result.stderr.strip()[-200:]!r})")
        absolute = await env.exec(["cat", f"{env.workdir.rstrip('/')}/{name}"], timeout=30)
        if absolute.stdout.strip() != token:
            raise AssertionError(f"a relative path did not resolve against workdir {env.workdir!r}")
    finally:
        with contextlib.suppress(Exception):
            await env.exec(["rm", "-f", name], timeout=30)


async def check_environment_provider(
    provider: Any, *, spec: EnvironmentSpec | None = None, host: Any = None, options: dict[str, Any] | None = None,
    detached: bool = True,
) -> None:
    """Every environment check on one session of ``provider`` (a registered name, a class or factory, or an
    instance): exec runs in the working directory, a timeout kills the process tree (with ``detached``, also
    a child in a session of its own), and paths are confined."""
    async with environment_sessions(provider, specs=[spec or EnvironmentSpec()], host=host,
                                    options=options) as sessions:
        env = await sessions.open(spec, task_id="conformance")
        await check_exec_in_workdir(env)
        await check_exec_timeout_kills_tree(env)
        if detached:
            await check_exec_timeout_kills_tree(env, detached=True)
        await check_paths_confined(env)


__all__ = [
    "DELIBERATE_ERROR",
    "check_benchmark",
    "check_collect_does_not_score",
    "check_environment_provider",
    "check_evaluate_keeps_error",
    "check_exec_in_workdir",
    "check_exec_timeout_kills_tree",
    "check_paths_confined",
    "check_prepare_idempotent",
    "default_request",
    "first_task",
    "host_workdir",
]
