"""The docker environment against a real engine: isolation, limits, timeouts, files, images, clean-up, the
model-gateway forwarder, and an unreachable engine."""

from __future__ import annotations

import asyncio
import os
import secrets
import stat
import time
from pathlib import Path

import pytest
from agentcompass.errors import EnvironmentUnavailable, InfrastructureError
from agentcompass.runtime import EnvironmentSpec, PruneReport
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.docker_engine import (
    ENGINES,
    IMAGE,
    PS,
    container_ps,
    run_containers,
    wait_until,
    wait_until_async,
)

pytestmark = pytest.mark.docker


#: Tests that also run on Podman with ``exec=docker`` (one ``podman exec`` per call: the fallback path, and slow on
#: Podman); every other test runs there on the default ``exec=server`` only, which keeps the Podman group fast.
PODMAN_EXEC_DOCKER = {"test_exec_env_cwd_and_errors", "test_timeout_kills_the_whole_tree", "test_upload_and_download_trees"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every provider test here runs on Docker (both exec paths) and on Podman (``--env-arg engine=podman``)."""
    if "container_engine" not in metafunc.fixturenames or "exec_mode" not in metafunc.fixturenames:
        return
    modes = ["server", "docker"]
    podman = modes if metafunc.function.__name__ in PODMAN_EXEC_DOCKER else ["server"]
    engine, on_podman = ENGINES
    metafunc.parametrize(
        ("container_engine", "exec_mode"),
        [pytest.param(engine, mode, id=f"{engine}-{mode}") for mode in modes]
        + [pytest.param(*on_podman.values, mode, marks=on_podman.marks, id=f"podman-{mode}") for mode in podman],
    )


def _running(session, needle: str):  # type: ignore[no-untyped-def]
    """An async predicate: whether a process whose command line holds ``needle`` runs in the session."""

    async def check() -> bool:
        return needle in (await session.exec(["sh", "-c", PS])).stdout

    return check


async def test_exec_env_cwd_and_errors(make_provider, run_id) -> None:
    spec = EnvironmentSpec(image=IMAGE, env={"FROM_SPEC": "spec", "BOTH": "spec"})
    provider = await make_provider(spec)
    session = await provider.open(spec, run_id=run_id, task_id="t", base_env={"FROM_BASE": "base", "BOTH": "base"})
    try:
        result = await session.exec(
            ["sh", "-c", 'echo "$FROM_BASE $FROM_SPEC $BOTH $EXTRA"; pwd; echo oops >&2; exit 3'],
            env={"EXTRA": "extra"},
        )
        assert (result.returncode, result.stdout, result.stderr, result.timed_out) == (
            3,
            "base spec spec extra\n/workspace\n",
            "oops\n",
            False,
        )
        await session.exec(["mkdir", "-p", "sub/dir"])
        assert (await session.exec(["pwd"], cwd="sub/dir")).stdout == "/workspace/sub/dir\n"
        assert (await session.exec(["pwd"], cwd="/tmp")).stdout == "/tmp\n"
        missing = await session.exec(["no-such-program"])
        assert missing.returncode == 127 and "not found" in missing.stderr
        with pytest.raises(FileNotFoundError):
            await session.read_text("does/not/exist")
        with pytest.raises(ValueError):
            await session.exec([])
        # Output without a final newline, and output holding the exec's own id and the wrapper's command line
        # (with its marker), pass intact and do not confuse the wrapper's status line.
        odd = await session.exec(
            ["sh", "-c", 'printf "no newline" >&2; env >&2; tr "\\0" " " < /proc/$PPID/cmdline >&2; exit 4']
        )
        assert odd.returncode == 4 and odd.stderr.startswith("no newline"), odd
        # The parent is the wrapper (docker exec) or the exec server: the static one (server=native, the
        # default), or the Python one, whose command line holds its own source.
        parent = "ac-exec" if provider.options.exec == "docker" else "/run/agentcompass/exec/ac-exec-server"
        assert "AGENTCOMPASS_EXEC_ID=" in odd.stderr and parent in odd.stderr
    finally:
        await provider.close(session)


async def test_isolation_defaults(session, cli, container_engine) -> None:
    info = cli.container.inspect(session.container_id)
    host = info.host_config
    assert host.network_mode == "none"
    assert host.privileged is False
    if container_engine == "docker":  # Podman lists every capability it dropped instead
        assert [c.upper().removeprefix("CAP_") for c in host.cap_drop] == ["ALL"]
    caps = (await session.exec(["grep", "-E", "^Cap(Eff|Prm|Bnd):", "/proc/self/status"])).stdout.split()
    assert caps[1::2] == ["0" * 16] * 3, caps
    assert "no-new-privileges" in (host.security_opt or [])
    assert host.memory == 2 * 1024**3 and host.memory_swap == host.memory
    assert host.nano_cpus == 1_000_000_000 and host.pids_limit == 512
    # No route out: a connect attempt fails at once.
    probe = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=3)\n"
        "    print('connected')\n"
        "except OSError as e:\n"
        "    print('failed', e)\n"
    )
    result = await session.exec(["python3", "-c", probe], timeout=30)
    assert result.stdout.startswith("failed"), result
    # Capabilities are gone even for root: chown needs CAP_CHOWN.
    chown = await session.exec(["sh", "-c", "touch f && chown 1:1 f"])
    assert chown.returncode != 0 and "not permitted" in chown.stderr


async def test_options_override_the_specs_limits(make_provider, run_id, cli) -> None:
    provider = await make_provider(memory="256m", cpus="0.5", pids_limit="64")
    session = await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id="limits", base_env={})
    try:
        host = cli.container.inspect(session.container_id).host_config
        assert (host.memory, host.nano_cpus, host.pids_limit) == (256 * 1024**2, 500_000_000, 64)
    finally:
        await provider.close(session)


async def test_containers_compete_for_cpu_as_host_processes_do(
    make_provider, run_id, cli, container_engine
) -> None:
    # Under the engine's /docker cgroup all containers together weigh as much as one host process (cgroupfs
    # driver): on a busy host their commands wait for CPU far longer than --env local's. So by default each
    # container's cgroup sits at the root; cgroup_parent= (empty) keeps the engine's default.
    provider = await make_provider()
    if provider.engine.cgroup_driver != "cgroupfs":
        pytest.skip(f"the engine's cgroup driver is {provider.engine.cgroup_driver!r}: the default is kept")
    spec = EnvironmentSpec(image=IMAGE)
    for options, parent in (({}, "/"), ({"cgroup_parent": ""}, "")):
        provider = await make_provider(**options)
        session = await provider.open(spec, run_id=run_id, task_id="cgroup", base_env={})
        try:
            said = str(cli.container.inspect(session.container_id).host_config.cgroup_parent or "")
            assert said.removeprefix(".") == parent, said  # python-on-whales reads "" as the path "."
            cpu = next(line for line in (await session.exec(["cat", "/proc/1/cgroup"])).stdout.splitlines()
                   if line.split(":")[1] in ("cpu,cpuacct", "cpu", "")).split(":")[2]
            default = {"docker": "/docker/", "podman": "/libpod_parent/"}[container_engine]  # the engine's group
            assert cpu.startswith(default) == (parent == ""), cpu
        finally:
            await provider.close(session)


async def test_memory_limit_kills_and_reports_oom(make_provider, run_id) -> None:
    spec = EnvironmentSpec(image=IMAGE, memory="64m")
    provider = await make_provider(spec)
    session = await provider.open(spec, run_id=run_id, task_id="oom", base_env={})
    try:
        result = await session.exec(["python3", "-c", "x = b'x' * (512 * 1024 * 1024); print('survived')"], timeout=60)
        assert result.returncode == -9 and not result.timed_out, result
        assert "survived" not in result.stdout
        assert "killed: out of memory (limit 64m)" in result.stderr
        # The container is still usable afterwards, and an ordinary failure is not reported as OOM.
        after = await session.exec(["sh", "-c", "exit 137"])
        assert after.returncode == 137 and "out of memory" not in after.stderr
    finally:
        await provider.close(session)


async def test_timeout_kills_the_whole_tree(session) -> None:
    started = time.monotonic()
    result = await session.exec(
        ["sh", "-c", "sleep 1001 & setsid sleep 1002 & (trap '' TERM; sleep 1003) & echo started; sleep 1004"],
        timeout=4,
    )
    assert result.timed_out and result.returncode == -9
    assert result.stdout == "started\n"  # output so far is kept
    assert time.monotonic() - started < 30
    # A deadline that passes before the engine even started the process: it is hunted down all the same.
    early = await session.exec(["sleep", "1005"], timeout=0.01)
    assert early.timed_out
    left = await session.exec(["sh", "-c", PS])
    assert "sleep 100" not in left.stdout, left.stdout
    # A later exec in the same container works as before.
    assert (await session.exec(["echo", "ok"])).stdout == "ok\n"


async def test_cancelled_exec_kills_its_processes(session) -> None:
    task = asyncio.create_task(session.exec(["sh", "-c", "sleep 1006"]))
    await wait_until_async(_running(session, "sleep 1006"), 10, "the exec runs")  # cancel once it runs
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    running = _running(session, "sleep 1006")

    async def stopped() -> bool:
        return not await running()

    await wait_until_async(stopped, 10, "the cancelled exec's process is gone")
    # Cancelled before the engine started it: gone too, once it shows up. The hunt for it runs in the
    # background until the exec's docker call returns; drain waits for that.
    task = asyncio.create_task(session.exec(["sleep", "1007"]))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await session.host.drain()
    assert "sleep 1007" not in (await session.exec(["sh", "-c", PS])).stdout


@pytest.mark.parametrize("size", [256 * 4, 300 * 1024], ids=["batched", "direct"])
async def test_binary_round_trip(session, size: int) -> None:
    data = (bytes(range(256)) * (size // 256 + 1))[:size]
    await session.write_bytes("bin/all.bytes", data)
    assert await session.read_bytes("bin/all.bytes") == data
    check = await session.exec(
        [
            "python3",
            "-c",
            f"import sys; d = open('/workspace/bin/all.bytes', 'rb').read(); print(len(d), d == (bytes(range(256)) * {size // 256 + 1})[:{size}])",
        ]
    )
    assert check.stdout == f"{size} True\n"
    await session.write_text("text/ünï.txt", "héllo\nwörld")
    assert await session.read_text("/workspace/text/ünï.txt") == "héllo\nwörld"


async def test_output_is_capped_per_stream(session) -> None:
    from agentcompass.runtime.environment import OUTPUT_LIMIT

    extra = 123_457
    result = await session.exec(
        ["sh", "-c", f"head -c {OUTPUT_LIMIT + extra} /dev/zero | tr '\\0' a; echo tail >&2; exit 5"], timeout=120
    )
    assert result.returncode == 5 and result.stderr == "tail\n"
    kept, _, note = result.stdout.partition("\n")
    assert kept == "a" * OUTPUT_LIMIT and note == f"[... {extra} more bytes cut]", note


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200_000), name=st.text(alphabet="abcxyzé-_. 0", min_size=1, max_size=12))
async def test_any_bytes_round_trip(session, data: bytes, name: str) -> None:
    if name.strip(".") == "":
        name = "x" + name
    await session.write_bytes(f"rt/{name}", data)  # small ones batched, large ones sent at once
    assert await session.read_bytes(f"rt/{name}") == data
    echoed = await session.exec(["sh", "-c", 'cat -- "$1"; cat -- "$1" >&2', "sh", f"rt/{name}"])
    assert echoed.stdout == echoed.stderr == data.decode("utf-8", "replace")


async def test_batched_writes_land_in_order_and_for_background_readers(session) -> None:
    # A process already running sees a write within the batching delay, with no further call.
    waiter = asyncio.create_task(
        session.exec(["sh", "-c", "while [ ! -f flag ]; do sleep 0.05; done; cat flag"], timeout=30)
    )
    await wait_until_async(_running(session, "while [ ! -f flag ]"), 10, "the waiter runs")
    await session.write_text("flag", "seen")
    result = await asyncio.wait_for(waiter, 30)
    assert result.stdout == "seen" and not result.timed_out
    # Several writes then an exec: the exec sees all of them, the last write of a path wins.
    for i in range(5):
        await session.write_text(f"many/{i}.txt", str(i))
    await session.write_text("many/0.txt", "zero")
    listing = await session.exec(["sh", "-c", "cat many/0.txt many/4.txt; ls many | wc -l"])
    assert listing.stdout == "zero45\n"
    # A write that cannot land is reported by the next operation.
    await session.write_text("/proc/forbidden/file", "x")
    with pytest.raises(OSError):
        await session.exec(["true"])
    assert (await session.exec(["echo", "still fine"])).stdout == "still fine\n"


async def test_upload_and_download_trees(session, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg" / "deep").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("VALUE = 42\n")
    (src / "pkg" / "deep" / "blob.bin").write_bytes(bytes(range(256)) * 3)
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    (src / "empty").mkdir()
    (src / "link").symlink_to("run.sh")
    await session.upload(src, "project")
    result = await session.exec(
        ["sh", "-c", "./run.sh && python3 -c 'import pkg; print(pkg.VALUE)' && ls -d empty && readlink link"],
        cwd="project",
    )
    assert result.stdout == "ran\n42\nempty\nrun.sh\n", result
    single = tmp_path / "single.txt"
    single.write_text("one file")
    await session.upload(single, "elsewhere/renamed.txt")
    assert await session.read_text("elsewhere/renamed.txt") == "one file"

    await session.exec(["sh", "-c", "echo changed > project/pkg/new.txt && mkdir -p project/made"])
    out = tmp_path / "out"
    await session.download("project", out)
    assert (out / "pkg" / "__init__.py").read_text() == "VALUE = 42\n"
    assert (out / "pkg" / "deep" / "blob.bin").read_bytes() == bytes(range(256)) * 3
    assert (out / "pkg" / "new.txt").read_text() == "changed\n"
    assert (out / "made").is_dir() and (out / "empty").is_dir()
    assert os.readlink(out / "link") == "run.sh"
    assert (out / "run.sh").stat().st_mode & stat.S_IXUSR
    await session.download("project/pkg/__init__.py", tmp_path / "one" / "init.py")
    assert (tmp_path / "one" / "init.py").read_text() == "VALUE = 42\n"
    with pytest.raises(FileNotFoundError):
        await session.download("nothing-here", tmp_path / "nothing")


async def test_read_only_root_and_non_root_user(make_provider, run_id, tmp_path: Path) -> None:
    spec = EnvironmentSpec(image=IMAGE, read_only=True, user="65534:65534")
    provider = await make_provider(spec)
    session = await provider.open(spec, run_id=run_id, task_id="ro", base_env={})
    try:
        assert (await session.exec(["id", "-u"])).stdout == "65534\n"
        await session.write_text("by-write.txt", "w")
        (tmp_path / "up").mkdir()
        (tmp_path / "up" / "f.txt").write_text("u")
        await session.upload(tmp_path / "up", "uploaded")
        made = await session.exec(
            ["sh", "-c", "echo e > by-exec.txt && echo t > /tmp/t.txt && stat -c %u by-write.txt uploaded/f.txt"]
        )
        assert made.returncode == 0 and made.stdout == "65534\n65534\n", made
        assert await session.read_text("uploaded/f.txt") == "u"
        for target in ("/etc/x", "/usr/x", "/x"):
            denied = await session.exec(["sh", "-c", f"echo x > {target}"])
            assert denied.returncode != 0 and ("Read-only" in denied.stderr or "denied" in denied.stderr), denied
    finally:
        await provider.close(session)


async def test_dockerfile_image_built_once_and_cached_by_hash(make_provider, run_id, tmp_path: Path, cli) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    nonce = secrets.token_hex(8)  # a new context, so the first build really builds
    (context / "marker.txt").write_text(nonce)
    (context / "Dockerfile").write_text("FROM python:3.11-slim\nCOPY marker.txt /marker.txt\nWORKDIR /workspace\n")
    spec = EnvironmentSpec(build_context=str(context))
    first = await make_provider(spec, EnvironmentSpec(build_context=str(context)))
    tags: list[str] = []
    try:
        await first.ready(spec)  # setup started the build; ready waits for it
        assert first.builds == 1  # two specs, one context: one build
        tag = (await first.image_for(spec)).ref
        tags.append(tag)
        assert tag.startswith("agentcompass-build:")
        session = await first.open(spec, run_id=run_id, task_id="built", base_env={})
        assert await session.read_text("/marker.txt") == nonce
        await first.close(session)
        second = await make_provider(spec)
        assert (await second.image_for(spec)).ref == tag and second.builds == 0
        # build arguments are part of the key
        with_args = EnvironmentSpec(build_context=str(context), build_args={"FLAVOUR": "b"})
        (context / "Dockerfile").write_text("FROM python:3.11-slim\nARG FLAVOUR=a\nCOPY marker.txt /marker.txt\n"
                                            "RUN echo $FLAVOUR > /flavour\n")
        fourth = await make_provider(with_args)
        await fourth.ready(with_args)
        tags.append((await fourth.image_for(with_args)).ref)
        session = await fourth.open(with_args, run_id=run_id, task_id="args", base_env={})
        assert (await session.read_text("/flavour")).strip() == "b"
        await fourth.close(session)
        (context / "marker.txt").write_text(nonce + "changed")
        third = await make_provider(spec)
        tags.append((await third.image_for(spec)).ref)
        assert third.builds == 1 and len(set(tags)) == 3
    finally:
        for built in tags:
            cli.image.remove(built, force=True)


async def test_broken_dockerfile_fails_its_opens_and_missing_image_stops_setup(make_provider, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM agentcompass-no-such-base:1\n")
    spec = EnvironmentSpec(build_context=str(tmp_path))
    provider = await make_provider(spec)  # builds go on in the background: only the tasks of this image fail
    with pytest.raises(EnvironmentUnavailable, match="building the image"):
        await provider.ready(spec)
    with pytest.raises(EnvironmentUnavailable, match="no-such-image-agentcompass:1"):
        await make_provider(EnvironmentSpec(image="no-such-image-agentcompass:1"))


async def test_labels_and_nothing_left_after_close(provider, run_id, cli, container_engine) -> None:
    spec = EnvironmentSpec(image=IMAGE)
    sessions = await asyncio.gather(
        *(provider.open(spec, run_id=run_id, task_id=f"task/{i}", base_env={}) for i in range(3))
    )
    assert len(run_containers(run_id, container_engine)) == 3
    labels = cli.container.inspect(sessions[1].container_id).config.labels
    assert labels["agentcompass.managed"] == "1"
    assert labels["agentcompass.run_id"] == run_id
    assert labels["agentcompass.task_id"] == "task/1"
    results = await asyncio.gather(*(s.exec(["echo", s.task_id]) for s in sessions))
    assert [r.stdout for r in results] == ["task/0\n", "task/1\n", "task/2\n"]
    await asyncio.gather(*(provider.close(s) for s in sessions))
    await provider.drain()  # removal runs in the background after close
    assert run_containers(run_id, container_engine) == []
    await provider.close(sessions[0])  # idempotent
    with pytest.raises(InfrastructureError):
        await sessions[0].exec(["true"])


async def test_close_can_wait_for_removal(make_provider, run_id, container_engine) -> None:
    strict = await make_provider(removal_backlog="0")
    session = await strict.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id="strict", base_env={})
    await strict.close(session)
    assert run_containers(run_id, container_engine) == []


async def test_prune_removes_leftovers(make_provider, run_id, container_engine) -> None:
    kept = await make_provider(keep="true")
    spec = EnvironmentSpec(image=IMAGE)
    for i in range(2):
        await kept.close(await kept.open(spec, run_id=run_id, task_id=f"k{i}", base_env={}))
    assert len(run_containers(run_id, container_engine)) == 2  # keep=true left them
    assert await kept.prune(run_id="some-other-run") == PruneReport(0)
    # This process made them and still runs: prune keeps them and says why (issue 32, item 6).
    report = await kept.prune(run_id=run_id)
    assert report.removed == 0 and len(report.skipped) == 2
    assert all(f"of run {run_id}: its process (pid {os.getpid()}) still runs" in line for line in report.skipped)
    assert len(run_containers(run_id, container_engine)) == 2
    assert kept.containers.prune(run_id, owned_too=True).removed == 2  # the run's own sweep removes them
    assert run_containers(run_id, container_engine) == []


async def test_close_and_cancellation_leave_nothing(provider, run_id, container_engine) -> None:
    spec = EnvironmentSpec(image=IMAGE)
    opening = asyncio.create_task(provider.open(spec, run_id=run_id, task_id="cancelled", base_env={}))
    # Cancel while the engine creates the container (or, on a fast engine, right after the open returned).
    await asyncio.to_thread(
        wait_until, lambda: run_containers(run_id, container_engine) or opening.done(), 60, "the create began"
    )
    opening.cancel()
    try:
        await provider.close(await opening)
    except asyncio.CancelledError:
        pass

    async def attempt() -> None:
        session = await provider.open(spec, run_id=run_id, task_id="interrupted", base_env={})
        try:
            await session.exec(["sleep", "1000"])
        finally:
            await asyncio.shield(provider.close(session))

    task = asyncio.create_task(attempt())

    def sleeping() -> bool:
        return any("sleep 1000" in container_ps(c, container_engine) for c in run_containers(run_id, container_engine))

    await asyncio.to_thread(wait_until, sleeping, 60, "the attempt's exec runs")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await provider.teardown()
    assert run_containers(run_id, container_engine) == []


async def test_gateway_forwarder_reaches_host_socket_without_network(make_provider, run_id, tmp_path: Path) -> None:
    from aiohttp import web

    seen: list[dict] = []

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append({"auth": request.headers.get("Authorization"), "body": body})
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": "pong"}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    socket_path = str(tmp_path / "gw.sock")
    await web.UnixSite(runner, socket_path).start()
    try:
        provider = await make_provider()
        base_url, extra_env = provider.gateway_address(host="127.0.0.1", port=18099, unix_socket=socket_path)
        assert base_url == "http://127.0.0.1:18099/v1" and extra_env == {}
        session = await provider.open(
            EnvironmentSpec(image=IMAGE, user="65534"),
            run_id=run_id,
            task_id="gw",
            base_env={"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "tok-123"},
        )
        client = (
            "import json, os, urllib.request\n"
            "req = urllib.request.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions',\n"
            "    data=json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'ping' * 50000}]}).encode(),\n"
            "    headers={'Content-Type': 'application/json', 'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY']})\n"
            "for _ in range(3):\n"
            "    print(json.load(urllib.request.urlopen(req, timeout=20))['choices'][0]['message']['content'])\n"
        )
        try:
            result = await session.exec(["python3", "-c", client], timeout=60)
            assert result.stdout == "pong\npong\npong\n", result
            assert len(seen) == 3 and seen[0]["auth"] == "Bearer tok-123"
            assert seen[0]["body"]["messages"][0]["content"] == "ping" * 50000
            # Nothing else is reachable: the host's bridge address and the internet both fail.
            probe = (
                "import socket\n"
                "for addr in [('172.17.0.1', 18099), ('1.1.1.1', 443)]:\n"
                "    try:\n"
                "        socket.create_connection(addr, timeout=3); print('connected')\n"
                "    except OSError:\n"
                "        print('failed')\n"
            )
            assert (await session.exec(["python3", "-c", probe], timeout=30)).stdout == "failed\nfailed\n"
        finally:
            await provider.close(session)
    finally:
        await runner.cleanup()


async def test_unreachable_engine_is_environment_unavailable(monkeypatch, tmp_path: Path) -> None:
    from agentcompass_docker.provider import DockerProvider

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    with pytest.raises(EnvironmentUnavailable) as caught:
        await DockerProvider().setup([EnvironmentSpec()], run_id="no-engine")
    message = str(caught.value)
    assert "docker-up.sh" in message and "dockerd" in message and "\n" not in message
    with pytest.raises(EnvironmentUnavailable):
        await DockerProvider(host=f"unix://{tmp_path}/other.sock").setup([], run_id="no-engine")


def test_plugin_registers_docker_without_importing_python_on_whales() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agentcompass_docker.plugin as p\n"
        "names = []\n"
        "p.register_environments(lambda name, factory: names.append((name, factory)))\n"
        "assert [n for n, _ in names] == ['docker'], names\n"
        "assert 'python_on_whales' not in sys.modules and 'pydantic' not in sys.modules\n"
        "provider = names[0][1](keep='false', memory='1g')\n"
        "assert provider.name == 'docker' and provider.options.memory == '1g'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    from agentcompass.errors import UsageError
    from agentcompass_docker.plugin import make_docker_provider

    with pytest.raises(UsageError, match="unknown docker environment option"):
        make_docker_provider(nope="1")
