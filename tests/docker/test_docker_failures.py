"""The docker environment when things go wrong, against a real engine: processes that try to outlive their
exec's timeout, containers killed or removed from outside, and teardown racing creates in flight."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest
from agentcompass.errors import InfrastructureError
from agentcompass.runtime import EnvironmentSpec
from python_on_whales import docker

from tests.helpers.docker_engine import IMAGE, container_ps, run_containers, wait_until

pytestmark = pytest.mark.docker


async def _left(container: str, needle: str) -> list[str]:
    ps = await asyncio.to_thread(container_ps, container)
    return [line for line in ps.splitlines() if needle in line]


async def _wait_gone(container: str, needle: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while left := await _left(container, needle):
        if time.monotonic() > deadline:
            pytest.fail(f"still running after {timeout} s: {left}")
        await asyncio.sleep(0.05)


# -- timeouts: every process of the exec dies, and only those -----------------------------------------------


async def test_timeout_kills_children_that_clear_their_environment_or_leave_the_session(session) -> None:
    # Started by an earlier exec that finished: not part of any later exec, so no timeout may touch it.
    bystander = await session.exec(["sh", "-c", "sleep 2001 > /dev/null 2>&1 &"])
    assert bystander.returncode == 0
    started = time.monotonic()
    result = await session.exec(["sh", "-c", "env -i sleep 100 & setsid sleep 100 & sleep 100"], timeout=1)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.returncode == -9, result
    assert elapsed < 2.5, f"a 1 s timeout returned after {elapsed:.2f} s"
    await _wait_gone(session.container_id, "sleep 100")
    # Harder: an orphan (its parent exited) in a session of its own with an empty environment; it still
    # holds the exec's output pipe, which is what ties it to the exec.
    started = time.monotonic()
    result = await session.exec(["sh", "-c", "sh -c 'setsid env -i sleep 101 &'; sleep 102"], timeout=1)
    assert result.timed_out and time.monotonic() - started < 2.5
    await _wait_gone(session.container_id, "sleep 10")
    assert await _left(session.container_id, "sleep 2001"), "another exec's background process was killed"
    assert (await session.exec(["echo", "ok"])).stdout == "ok\n"


# -- the container goes away under a call: InfrastructureError (retried), never a bogus exit status ------------


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("rm", "was removed during exec"),
        ("kill", r"was stopped or killed \(status exited, exit code 137\) during exec"),
        ("stop", r"was stopped or killed \(status exited, exit code 143\) during exec"),
    ],
)
async def test_container_gone_during_exec_is_an_infrastructure_error(
    provider, run_id, tmp_path: Path, how: str, said: str
) -> None:
    session = await provider.open(EnvironmentSpec(image=IMAGE), run_id=run_id, task_id=f"gone-{how}", base_env={})
    if session.autoremove:  # exec=server runs containers with --rm: a stopped one may be gone before it is asked
        said = rf"(?:{said}|was stopped, killed or removed \(the engine removes it once it stops\) during exec)"
    try:
        running = asyncio.create_task(session.exec(["sleep", "30"]))
        await asyncio.to_thread(
            wait_until, lambda: "sleep 30" in container_ps(session.container_id), 30, "the exec runs"
        )
        if how == "rm":
            await asyncio.to_thread(docker.container.remove, session.container_id, force=True)
        elif how == "kill":
            await asyncio.to_thread(docker.container.kill, session.container_id)
        else:
            await asyncio.to_thread(docker.container.stop, session.container_id, time=5)
        with pytest.raises(InfrastructureError, match=f"{session.name} of task 'gone-{how}' {said}"):
            await asyncio.wait_for(running, 30)
        # Every later operation says so too, instead of a file error or an exit status.
        with pytest.raises(InfrastructureError, match="during exec"):
            await session.exec(["true"])
        with pytest.raises(InfrastructureError, match="during read_bytes"):
            await session.read_bytes("anything")
        with pytest.raises(InfrastructureError, match="during write_bytes"):
            await session.write_bytes("big.bin", b"x" * (300 * 1024))  # large: written at once
        await session.write_text("small.txt", "x")  # batched: its failure shows at the next operation
        with pytest.raises(InfrastructureError):
            await session.exec(["true"])
        (tmp_path / "up.txt").write_text("u")
        with pytest.raises(InfrastructureError, match="during upload"):
            await session.upload(tmp_path / "up.txt", "up.txt")
        with pytest.raises(InfrastructureError, match="during download"):
            await session.download("/etc/hostname", tmp_path / "hostname")
    finally:
        await provider.close(session)


async def test_an_exit_status_137_of_the_command_itself_stays_a_result(session) -> None:
    # The command's process killed from inside (the container stays up): a plain result, not an infrastructure
    # error. Under docker exec that is the wrapper; under the server, the command itself (its parent is the
    # server, whose death is an infrastructure error: tests/docker/test_docker_server.py).
    victim = "$PPID" if session.host.options.exec == "docker" else "$$"
    result = await session.exec(["sh", "-c", f"kill -9 {victim}; sleep 5"], timeout=30)
    assert result.returncode == 137 and not result.timed_out, result
    assert (await session.exec(["echo", "fine"])).stdout == "fine\n"


# -- teardown: every container of the run goes, also those still being created ------------------------------------


async def test_teardown_removes_containers_whose_creation_was_in_flight(make_provider, run_id) -> None:
    provider = await make_provider()
    spec = EnvironmentSpec(image=IMAGE)
    opening = [
        asyncio.create_task(provider.open(spec, run_id=run_id, task_id=f"inflight-{i}", base_env={})) for i in range(8)
    ]
    # Interrupt as soon as the engine knows the first one: the others are being created right now.
    await asyncio.to_thread(wait_until, lambda: run_containers(run_id), 60, "a container exists")
    for task in opening:
        task.cancel()
    await asyncio.gather(*opening, return_exceptions=True)
    await provider.teardown()
    assert run_containers(run_id) == []


async def test_teardown_cancelled_itself_still_removes_everything(make_provider, run_id) -> None:
    """A second Ctrl-C cancels the teardown too: the sweep goes on in its own thread."""
    provider = await make_provider()
    spec = EnvironmentSpec(image=IMAGE)
    sessions = await asyncio.gather(
        *(provider.open(spec, run_id=run_id, task_id=f"open-{i}", base_env={}) for i in range(3))
    )
    assert len(sessions) == 3
    opening = [
        asyncio.create_task(provider.open(spec, run_id=run_id, task_id=f"late-{i}", base_env={})) for i in range(5)
    ]
    await asyncio.to_thread(wait_until, lambda: len(run_containers(run_id)) > 3, 60, "a late container exists")
    teardown = asyncio.create_task(provider.teardown())
    await asyncio.sleep(0)  # it has started: creates are refused from here on
    teardown.cancel()
    for task in opening:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await teardown
    await asyncio.gather(*opening, return_exceptions=True)
    await asyncio.to_thread(wait_until, lambda: not run_containers(run_id), 120, "every container is removed")
    with pytest.raises(InfrastructureError):  # nothing new starts after teardown began
        await provider.open(spec, run_id=run_id, task_id="after", base_env={})
