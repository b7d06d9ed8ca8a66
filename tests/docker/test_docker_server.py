"""The exec server path (``exec=server``) and the warm pool (``prestart``) against a real engine: what happens
when the server or its socket goes away, an image without ``python3``, concurrent commands in one session,
the socket directory's ownership and mounts, the host-side bound on a server that stops answering, and pool
containers (started ahead, handed to one task each, bounded, removed on every path)."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import stat
import time
from pathlib import Path

import pytest
from agentcompass.errors import InfrastructureError
from agentcompass.runtime import EnvironmentSpec
from agentcompass.testing import check_exec_timeout_kills_tree
from python_on_whales import docker

from tests.helpers.docker_engine import ENGINES, IMAGE, client, container_ps, run_containers, wait_until

pytestmark = pytest.mark.docker


#: What each exec server (``--env-arg server=``) runs as, in ``ps``.
SERVER_PROGRAMS = {"native": "/run/agentcompass/exec/ac-exec-server", "python": "python3"}


@pytest.fixture
def exec_mode() -> str:
    """Every test here is about the server path."""
    return "server"


def _server_pid(session, program: str = SERVER_PROGRAMS["native"]) -> int:  # type: ignore[no-untyped-def]
    """The server's pid, as it said it, checked against the container's processes (``program`` is running it)."""
    pid = session.server_pid
    assert pid > 0 and program in container_ps(session.container_id).split(f"\n{pid} ", 1)[-1][:40]
    return int(pid)


def _pool_containers(run_id: str, engine: str = "docker") -> list[str]:
    return [
        c.id
        for c in client(engine).container.list(
            all=True, filters=[("label", f"agentcompass.run_id={run_id}"), ("label", "agentcompass.pool=1")]
        )
    ]


# -- the server goes away: InfrastructureError, never an exit status -----------------------------------------


@pytest.mark.parametrize("server", ["native", "python"])
@pytest.mark.parametrize("how", ["kill-server", "kill-1"])
async def test_a_dead_server_is_an_infrastructure_error(make_provider, run_id, how: str, server: str) -> None:
    provider = await make_provider(server=server)
    session = await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id=f"dead-{how}", base_env={})
    try:
        assert (await session.exec(["echo", "up"])).stdout == "up\n"
        if how == "kill-server":
            pid = await asyncio.to_thread(_server_pid, session, SERVER_PROGRAMS[server])
            command = f"kill -9 {pid}; sleep 5"
            said = "exec server of container"
        else:  # PID 1 (docker-init) passes the TERM to the keeper: the container stops (and, --rm, goes)
            command = "kill -TERM 1; sleep 5"
            said = r"was stopped or killed|was stopped, killed or removed \(the engine removes it once it stops\)"
        with pytest.raises(InfrastructureError, match=said):
            await session.exec(["sh", "-c", command], timeout=30)
        for call in (session.exec(["true"]), session.read_bytes("/etc/hostname"), session.write_bytes("f", b"x" * 99999)):
            with pytest.raises(InfrastructureError):
                await call
    finally:
        await provider.close(session)


async def test_a_removed_socket_directory_is_an_infrastructure_error(session) -> None:
    assert (await session.exec(["true"])).returncode == 0
    await asyncio.to_thread(shutil.rmtree, session.exec_dir)
    with pytest.raises(InfrastructureError, match="has no socket any more"):
        await session.exec(["true"])
    with pytest.raises(InfrastructureError, match="during read_bytes"):
        await session.read_bytes("/etc/hostname")


async def test_a_socket_the_container_replaced_never_gets_a_request(provider, run_id) -> None:
    first, second = [
        await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id=t, base_env={"TOKEN": t})
        for t in ("first", "second")
    ]
    try:
        # The first task points its socket (a file of its own directory) at the second's, on the host.
        await first.exec(["ln", "-sf", second.socket, "/run/agentcompass/exec/exec.sock"])
        with pytest.raises(InfrastructureError, match="answered from outside its container"):
            await first.exec(["sh", "-c", "echo $TOKEN > /tmp/ran-here"])
        assert (await second.exec(["sh", "-c", "cat /tmp/ran-here 2>/dev/null || echo clean"])).stdout == "clean\n"
    finally:
        await provider.close(first)
        await provider.close(second)


@pytest.mark.parametrize("server", ["native", "python"])
async def test_a_server_that_stops_answering_is_bounded_by_the_host(make_provider, run_id, monkeypatch, server) -> None:
    from agentcompass_docker import server_session

    monkeypatch.setattr(server_session, "HOST_GRACE", 1.0)
    provider = await make_provider(server=server)
    session = await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id="stuck", base_env={})
    pid = await asyncio.to_thread(_server_pid, session, SERVER_PROGRAMS[server])
    try:
        await asyncio.to_thread(docker.container.execute, session.container_id, ["sh", "-c", f"kill -STOP {pid}"])
        started = time.monotonic()
        with pytest.raises(InfrastructureError, match="did not end a timed-out exec"):
            await session.exec(["sleep", "30"], timeout=0.5)
        assert time.monotonic() - started < 10
    finally:
        await provider.close(session)


# -- an image without python3: the static server; with server=python, docker exec, said in the logs ----------


def _no_python_spec(tmp_path: Path) -> EnvironmentSpec:
    context = tmp_path / "nopython"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {IMAGE}\nRUN rm -f /usr/local/bin/python* /usr/bin/python*\nWORKDIR /workspace\n"
    )
    return EnvironmentSpec(build_context=str(context), env={"FROM_SPEC": "spec"})


async def _works_without_python(session) -> None:  # type: ignore[no-untyped-def]
    """Commands (with the base and the spec's environment), files and timeouts in an image without python3."""
    result = await session.exec(["sh", "-c", 'echo "$FROM_BASE $FROM_SPEC"; command -v python3 || echo none'])
    assert result.stdout == "base spec\nnone\n", result
    await session.write_bytes("bin/data", bytes(range(256)))
    assert await session.read_bytes("bin/data") == bytes(range(256))
    await check_exec_timeout_kills_tree(session, detached=True)


async def _runs_the_python_server(provider, run_id: str, task_id: str) -> None:  # type: ignore[no-untyped-def]
    session = await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id=task_id, base_env={})
    try:
        await asyncio.to_thread(_server_pid, session, SERVER_PROGRAMS["python"])
        assert (await session.exec(["echo", "py"])).stdout == "py\n"
    finally:
        await provider.close(session)


async def test_an_image_without_python_runs_the_static_server(make_provider, run_id, tmp_path: Path) -> None:
    spec = _no_python_spec(tmp_path)
    provider = await make_provider(spec)
    tag = (await provider.image_for(spec)).ref
    try:
        session = await provider.open(spec, run_id=run_id, task_id="nopy", base_env={"FROM_BASE": "base"})
        try:
            assert session.fallback is None
            await asyncio.to_thread(_server_pid, session)
            await _works_without_python(session)
        finally:
            await provider.close(session)
    finally:
        docker.image.remove(tag, force=True)


async def test_without_a_static_server_the_python_one_runs(make_provider, run_id, tmp_path: Path, monkeypatch,
                                                          caplog) -> None:
    from agentcompass_docker import native

    # No compiler on this host: said once, and every container runs the Python server.
    monkeypatch.setattr(native, "build", lambda: (_ for _ in ()).throw(native.BuildFailed("no gcc on PATH")))
    with caplog.at_level(logging.WARNING, logger="agentcompass"):
        provider = await make_provider()
    assert any("docker.exec_server_python" in r.getMessage() and "no gcc" in r.getMessage() for r in caplog.records)
    await _runs_the_python_server(provider, run_id, "nogcc")
    # A binary that cannot run in the container (here: its interpreter is missing, status 127): the keeper
    # starts the Python server instead.
    unusable = tmp_path / "unusable"
    unusable.write_text("#!/no/such/interpreter\n")
    monkeypatch.setattr(native, "build", lambda: unusable)
    await _runs_the_python_server(await make_provider(), run_id, "noexec")


async def test_an_image_without_python_falls_back_to_docker_exec(make_provider, run_id, tmp_path: Path, caplog) -> None:
    spec = _no_python_spec(tmp_path)
    provider = await make_provider(spec, server="python")
    tag = (await provider.image_for(spec)).ref
    try:
        with caplog.at_level(logging.WARNING, logger="agentcompass"):
            session = await provider.open(spec, run_id=run_id, task_id="nopy", base_env={"FROM_BASE": "base"})
        try:
            assert session.fallback == "the image has no python3"
            events = [r.getMessage() for r in caplog.records if "docker.exec_fallback" in r.getMessage()]
            assert events and tag in events[0] and "no python3" in events[0], caplog.text
            await _works_without_python(session)
        finally:
            await provider.close(session)
    finally:
        docker.image.remove(tag, force=True)


# -- concurrency, output caps ---------------------------------------------------------------------------------


async def test_commands_of_one_session_run_concurrently(session) -> None:
    started = time.monotonic()
    results = await asyncio.gather(*(session.exec(["sh", "-c", f"sleep 1; echo {i}"]) for i in range(8)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(8)]
    assert time.monotonic() - started < 5, "eight 1 s commands took as long as running them one by one"
    # A timeout kills its own exec only; one running beside it finishes.
    slow = asyncio.create_task(session.exec(["sh", "-c", "sleep 2; echo survived"], timeout=30))
    killed = await session.exec(["sh", "-c", "sleep 30 & sleep 30"], timeout=0.5)
    assert killed.timed_out and (await slow).stdout == "survived\n"


# -- the socket directory ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("user", [None, "65534:65534"], ids=["root", "nobody"])
async def test_socket_directory_is_private_and_mounted_into_one_container(make_provider, run_id, user) -> None:
    spec = EnvironmentSpec(image=IMAGE, user=user)
    provider = await make_provider(spec)
    first = await provider.open(spec, run_id=run_id, task_id="a", base_env={})
    second = await provider.open(spec, run_id=run_id, task_id="b", base_env={})
    try:
        info = os.stat(first.exec_dir)
        assert stat.S_IMODE(info.st_mode) == 0o700
        assert info.st_uid == (65534 if user else os.geteuid())
        assert len(os.path.join(first.exec_dir, "exec.sock")) < 100  # the kernel's sun_path limit is 108
        socket_mode = os.stat(os.path.join(first.exec_dir, "exec.sock")).st_mode
        assert stat.S_ISSOCK(socket_mode) and stat.S_IMODE(socket_mode) == 0o600
        for session, other in ((first, second), (second, first)):
            mounts = docker.container.inspect(session.container_id).mounts
            binds = [(m.source, m.destination) for m in mounts if m.type == "bind"]
            assert binds == [(session.exec_dir, "/run/agentcompass/exec")], binds
            assert other.exec_dir not in str(mounts)
        host = docker.container.inspect(first.container_id).host_config
        assert host.network_mode == "none" and "no-new-privileges" in (host.security_opt or [])
        assert [c.upper().removeprefix("CAP_") for c in host.cap_drop] == ["ALL"] and not host.cap_add
        assert (await first.exec(["id", "-u"])).stdout == ("65534\n" if user else "0\n")
    finally:
        await provider.close(first)
        await provider.close(second)
    await provider.drain()
    assert not os.path.exists(first.exec_dir) and not os.path.exists(second.exec_dir)


# -- closing a session: the server ends its container (no docker call), rm -f when it does not answer ----------


def _recording(provider) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """Every docker CLI call the provider makes from now on (its arguments)."""
    calls: list[list[str]] = []
    cli = provider.engine.cli

    def record(args, timeout, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(list(args))
        return cli(args, timeout, **kwargs)

    provider.engine.cli = record
    return calls


async def test_close_ends_the_container_through_its_server_without_a_docker_call(provider, run_id) -> None:
    session = await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id="end", base_env={})
    assert session.autoremove
    await session.exec(["sh", "-c", "setsid sleep 1000 > /dev/null 2>&1 &"])  # a process left running
    calls = _recording(provider)
    await provider.close(session)
    await provider.drain()  # waits until the engine has removed it (one listing per look)
    assert run_containers(run_id) == [] and not os.path.exists(session.exec_dir)
    assert [c for c in calls if c[0] != "ps"] == [], calls  # no rm, no inspect: only listings while waiting
    assert len(calls) <= 10


async def test_close_falls_back_to_rm_when_the_server_does_not_answer(provider, run_id) -> None:
    session = await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id="stuck", base_env={})
    pid = await asyncio.to_thread(_server_pid, session)
    await asyncio.to_thread(docker.container.execute, session.container_id, ["sh", "-c", f"kill -STOP {pid}"])
    calls = _recording(provider)
    started = time.monotonic()
    await provider.close(session)
    await provider.drain()
    assert time.monotonic() - started < 20
    assert any(c[:2] == ["rm", "--force"] and session.container_id in c for c in calls), calls
    assert run_containers(run_id) == [] and not os.path.exists(session.exec_dir)


# -- the warm pool ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("container_engine", ENGINES)
async def test_pool_starts_containers_ahead_and_hands_each_to_one_task(make_provider, run_id, container_engine, cli
                                                                       ) -> None:
    specs = [EnvironmentSpec(image=IMAGE) for _ in range(4)]  # one per task, as a benchmark makes them
    provider = await make_provider(*specs, prestart="2")

    def pool() -> list[str]:
        return _pool_containers(run_id, container_engine)

    ready = await asyncio.to_thread(wait_until, lambda: len(pool()) == 2 and pool(), 60, "two pool containers exist")
    labels = cli.container.inspect(ready[0]).config.labels
    assert labels["agentcompass.pool"] == "1" and "agentcompass.task_id" not in labels
    sessions = []
    for i in range(4):
        sessions.append(await provider.open(specs[i], run_id=run_id, task_id=f"t{i}", base_env={"TOKEN": f"tok-{i}"}))
    assert sessions[0].container_id in ready
    assert len({s.container_id for s in sessions}) == 4  # never one container for two tasks
    results = await asyncio.gather(*(s.exec(["sh", "-c", "echo $TOKEN"]) for s in sessions))
    assert [r.stdout for r in results] == [f"tok-{i}\n" for i in range(4)]
    assert len(run_containers(run_id, container_engine)) == 4  # the prediction is used up: nothing more was started
    for session in sessions:
        await provider.close(session)
    await provider.drain()
    assert run_containers(run_id, container_engine) == []


async def test_pool_serves_every_task_when_all_tasks_share_one_spec_object(make_provider, run_id, caplog) -> None:
    shared = EnvironmentSpec(image=IMAGE)  # one object for every task, as many benchmarks return
    tasks = 5
    provider = await make_provider(*[shared] * tasks, prestart="2")
    with caplog.at_level(logging.DEBUG, logger="agentcompass"):
        sessions = []
        for i in range(tasks):
            await asyncio.to_thread(wait_until, lambda: len(_pool_containers(run_id)) >= 1, 60, "a pool container")
            session = await provider.open(shared, run_id=run_id, task_id=f"t{i}", base_env={})
            sessions.append(session)
            assert (await session.exec(["true"])).returncode == 0
            await provider.close(session)
    taken = [r.getMessage() for r in caplog.records if "docker.pool_taken" in r.getMessage()]
    assert len(taken) == tasks, caplog.text  # the pool served every task
    assert all(f"t{i}" in message for i, message in enumerate(taken))
    assert all(s.start_seconds["pooled"] == 1.0 for s in sessions)
    await provider.drain()
    assert run_containers(run_id) == []  # and it started nothing past the last task


async def test_pool_is_bounded_by_max_environments_and_removed_at_teardown(make_provider, run_id) -> None:
    specs = [EnvironmentSpec(image=IMAGE) for _ in range(6)]
    provider = await make_provider(*specs, concurrency=8, max_environments=2)
    await asyncio.to_thread(wait_until, lambda: len(_pool_containers(run_id)) == 2, 60, "the pool filled")
    await asyncio.sleep(1.0)
    assert len(run_containers(run_id)) == 2
    dirs = set(provider._exec_dirs)
    assert len(dirs) == 2
    await provider.teardown()  # nothing took them
    assert run_containers(run_id) == []
    assert not any(os.path.exists(d) for d in dirs)


async def test_pool_default_follows_the_runs_concurrency(make_provider, run_id) -> None:
    specs = [EnvironmentSpec(image=IMAGE) for _ in range(3)]
    alone = await make_provider(*specs, concurrency=1)
    assert alone._pool.size == 0
    provider = await make_provider(*specs, *specs, concurrency=4)  # two trials: each task twice
    assert provider._pool.size == 4
    await asyncio.to_thread(wait_until, lambda: len(_pool_containers(run_id)) == 4, 60, "the pool filled")
    explicit = await make_provider(*specs, concurrency=4, prestart="0")
    assert explicit._pool.size == 0
    bounded = await make_provider(*specs, concurrency=8, max_environments=3)
    assert bounded._pool.size == 3
