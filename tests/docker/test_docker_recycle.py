"""``EnvironmentSpec(recycle=True)`` against a real engine: a task's container goes on to the next task of the
same spec once reset (its processes killed, its working directory, ``/tmp`` and ``/dev/shm`` emptied), only as
long as a coming task wants one, never after its network was switched, and nothing is left after the run."""

from __future__ import annotations

import asyncio
import logging

import pytest
from agentcompass.runtime import EnvironmentSpec
from agentcompass.runtime.types import NetworkPolicy

from tests.helpers.docker_engine import IMAGE, run_containers, wait_until

pytestmark = pytest.mark.docker

#: Prints what a task may have left: files in the working directory, /tmp and /dev/shm, and processes other than
#: PID 1, the exec server, its keeper and this script's own.
LEFTOVERS = r"""
ls -A . /tmp /dev/shm | grep -v ':$' | grep -v '^$'
for d in /proc/[0-9]*; do
  read -r line < "$d/stat" 2>/dev/null || continue
  case "$line" in *"(sleep)"*) echo "process: $line" ;; esac
done
true
"""
#: What a careless task leaves behind.
LITTER = ("echo x > mine.txt; mkdir -p sub/dir; touch .hidden /tmp/t /dev/shm/s; "
          "(sleep 300 >/dev/null 2>&1 &); sleep 300 >/dev/null 2>&1 & true")


@pytest.fixture
def exec_mode() -> str:
    """Recycling is a feature of the server path (the warm pool)."""
    return "server"


async def test_a_recycled_container_goes_to_the_next_task_emptied_and_without_its_processes(make_provider, run_id):
    shared = EnvironmentSpec(image=IMAGE, recycle=True)
    tasks = 4
    provider = await make_provider(*[shared] * tasks, prestart="1")
    used = []
    for i in range(tasks):
        session = await provider.open(shared, run_id=run_id, task_id=f"t{i}", base_env={"TOKEN": f"tok-{i}"})
        used.append(session.container_id)
        left = await session.exec(["sh", "-c", LEFTOVERS])
        assert left.returncode == 0 and left.stdout == "", f"task {i} found {left.stdout!r}"
        assert (await session.exec(["sh", "-c", "echo $TOKEN"])).stdout == f"tok-{i}\n"  # its own base env
        assert (await session.exec(["sh", "-c", LITTER], timeout=30)).returncode == 0
        await provider.close(session)
    assert len(set(used)) < tasks  # containers went on to later tasks
    await provider.drain()
    assert run_containers(run_id) == []  # the last ones, wanted by no task, were ended as usual


async def test_without_recycle_no_container_serves_two_tasks(make_provider, run_id) -> None:
    shared = EnvironmentSpec(image=IMAGE)
    provider = await make_provider(*[shared] * 3, prestart="1")
    used = []
    for i in range(3):
        session = await provider.open(shared, run_id=run_id, task_id=f"t{i}", base_env={})
        used.append(session.container_id)
        await provider.close(session)
    assert len(set(used)) == 3


async def _first_is_not_handed_on(provider, run_id: str, shared: EnvironmentSpec, first) -> None:  # type: ignore[no-untyped-def]
    """``first`` (closed) goes away, and the later tasks (two more) get other containers."""
    await asyncio.to_thread(wait_until, lambda: first.container_id not in run_containers(run_id), 60,
                            "the first task's container is gone")
    for i in (1, 2):
        later = await provider.open(shared, run_id=run_id, task_id=f"t{i}", base_env={})
        assert later.container_id != first.container_id
        await provider.close(later)


async def test_a_container_whose_network_was_switched_is_not_handed_on(make_provider, run_id) -> None:
    shared = EnvironmentSpec(image=IMAGE, recycle=True)
    provider = await make_provider(*[shared] * 3, prestart="1")
    first = await provider.open(shared, run_id=run_id, task_id="t0", base_env={})
    await first.set_network(NetworkPolicy("no-network"))
    await provider.close(first)
    await _first_is_not_handed_on(provider, run_id, shared, first)


async def test_a_container_the_reset_cannot_empty_is_removed_not_handed_on(make_provider, run_id, caplog) -> None:
    shared = EnvironmentSpec(image=IMAGE, recycle=True, user="1000")
    provider = await make_provider(*[shared] * 3, prestart="1")
    first = await provider.open(shared, run_id=run_id, task_id="t0", base_env={})
    # a directory the session's user cannot empty: its contents stay, so the reset fails
    made = await first.exec(["sh", "-c", "mkdir locked && touch locked/f && chmod 500 locked"])
    assert made.returncode == 0, made.stderr
    with caplog.at_level(logging.WARNING, logger="agentcompass"):
        await provider.close(first)
        await _first_is_not_handed_on(provider, run_id, shared, first)
    assert "docker.recycle_failed" in caplog.text and "cannot empty /workspace" in caplog.text
