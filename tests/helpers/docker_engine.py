"""The one decision whether the docker tests can run here, shared by every suite that needs a Docker engine
(``tests/docker``, ``tests/example_coding``, ``tests/models``), plus polling helpers for those tests.

Without an engine (or without the test image) they skip with a one-line reason; with
``AGENTCOMPASS_REQUIRE_DOCKER=1`` (CI) ``tests/conftest.py`` turns such a skip into a failure.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

IMAGE = "python:3.11-slim"
HINT = "run .ci/docker-up.sh as root (or point DOCKER_HOST at an engine)"
CHECK_TIMEOUT = 30.0

#: Every process of a container, one line each: ``PID CMDLINE`` (no ``ps`` needed in the image).
PS = 'for p in /proc/[0-9]*; do printf "%s " "${p#/proc/}"; tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done'


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


@functools.cache
def engine_problem() -> str | None:
    """Why the docker tests cannot run here (one readable line), or None."""
    docker = shutil.which("docker")
    if docker is None:
        return f"the docker CLI is not installed; {HINT}"
    try:
        info = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return f"no Docker engine answered `docker info` within {CHECK_TIMEOUT:.0f} s; {HINT}"
    if info.returncode != 0 or not info.stdout.strip():
        why = _last_line(info.stderr) or f"exit status {info.returncode}"
        return f"no Docker engine answers `docker info`: {why}; {HINT}"
    image = subprocess.run([docker, "image", "inspect", IMAGE], capture_output=True, text=True, timeout=CHECK_TIMEOUT)
    if image.returncode != 0:
        return f"the Docker engine has no image {IMAGE}; {HINT}"
    return None


def require_engine() -> None:
    """Skip the calling test unless a Docker engine (with the test image) answers."""
    problem = engine_problem()
    if problem:
        pytest.skip(problem)


def container_ps(container: str) -> str:
    """The processes running in ``container`` (see :data:`PS`), read from outside any session; empty when
    the container cannot run anything (gone, stopped)."""
    from python_on_whales import docker
    from python_on_whales.exceptions import DockerException

    try:
        return str(docker.container.execute(container, ["sh", "-c", PS]))
    except DockerException:
        return ""


def host_processes_mentioning(text: str) -> list[str]:
    """Command lines of this machine's processes that contain ``text`` (e.g. a ``docker create`` in flight)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in line:
            found.append(line)
    return found


def wait_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout} s waiting until {what}")
        time.sleep(interval)


async def wait_until_async(
    predicate: Callable[[], Awaitable[T]], timeout: float, what: str, interval: float = 0.05
) -> T:
    """:func:`wait_until` for an async predicate."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout} s waiting until {what}")
        await asyncio.sleep(interval)


def run_containers(run_id: str) -> list[str]:
    """The ids of the containers labelled with ``run_id`` (running or not)."""
    from python_on_whales import docker

    return [c.id for c in docker.container.list(all=True, filters=[("label", f"agentcompass.run_id={run_id}")])]
