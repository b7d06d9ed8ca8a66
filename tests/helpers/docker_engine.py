"""The one decision whether the docker tests can run here, shared by every suite that needs a Docker engine
(``tests/docker``, ``tests/example_coding``, ``tests/models``), plus polling helpers for those tests. The
same for Podman (:func:`podman_problem`), which ``tests/docker`` also runs the docker environment on.

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
from typing import TYPE_CHECKING, TypeVar

import pytest

if TYPE_CHECKING:
    from python_on_whales import DockerClient

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


#: ``container_engine`` parameters (``tests/docker/conftest.py``) of a module whose tests run on both engines:
#: the Podman ones carry the ``podman`` marker (``-m podman`` selects them) besides the module's ``docker`` one.
ENGINES = ["docker", pytest.param("podman", marks=pytest.mark.podman)]
PODMAN_HINT = "run .ci/podman-up.sh as root (after .ci/docker-up.sh): it installs Podman and configures it here"


@functools.cache
def podman_problem() -> str | None:
    """Why the docker tests cannot run on Podman here (one readable line), or None. Podman's store gets the
    test image from the Docker engine (``docker save | podman load``: no registry is reachable) when it lacks
    it, tagged as Docker names it."""
    podman = shutil.which("podman")
    if podman is None:
        return f"the podman CLI is not installed; {PODMAN_HINT}"
    try:
        info = subprocess.run([podman, "info", "--format", "{{.Host.CgroupManager}}"], capture_output=True,
                              text=True, timeout=CHECK_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"podman did not answer `podman info` within {CHECK_TIMEOUT:.0f} s; {PODMAN_HINT}"
    if info.returncode != 0:
        return f"`podman info` fails: {_last_line(info.stderr) or info.returncode}; {PODMAN_HINT}"
    if subprocess.run([podman, "image", "exists", IMAGE], timeout=CHECK_TIMEOUT).returncode != 0:
        problem = engine_problem()
        if problem:
            return f"Podman has no image {IMAGE} and it cannot be copied from Docker: {problem}"
        save = subprocess.Popen(["docker", "save", IMAGE], stdout=subprocess.PIPE)
        load = subprocess.run([podman, "load"], stdin=save.stdout, capture_output=True, text=True, timeout=600)
        save.wait(60)
        loaded = f"localhost/{IMAGE}"
        if load.returncode != 0 or save.returncode != 0 or subprocess.run(
            [podman, "tag", loaded, f"docker.io/library/{IMAGE}"], capture_output=True, timeout=CHECK_TIMEOUT
        ).returncode != 0:
            return f"cannot copy {IMAGE} from Docker into Podman: {_last_line(load.stderr)}; {PODMAN_HINT}"
        subprocess.run([podman, "untag", loaded, loaded], capture_output=True, timeout=CHECK_TIMEOUT)
    return None


def require_engine(engine: str = "docker") -> None:
    """Skip the calling test unless the engine (``docker`` or ``podman``, with the test image) answers."""
    problem = podman_problem() if engine == "podman" else engine_problem()
    if problem:
        pytest.skip(problem)


def client(engine: str = "docker") -> DockerClient:
    """The python-on-whales client of ``engine`` (``docker`` or ``podman``)."""
    from python_on_whales import DockerClient

    return DockerClient(client_call=[engine], client_type="podman" if engine == "podman" else "docker")


def container_ps(container: str, engine: str = "docker") -> str:
    """The processes running in ``container`` (see :data:`PS`), read from outside any session; empty when
    the container cannot run anything (gone, stopped)."""
    from python_on_whales.exceptions import DockerException

    try:
        return str(client(engine).container.execute(container, ["sh", "-c", PS]))
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


def run_containers(run_id: str, engine: str = "docker") -> list[str]:
    """The ids of the containers labelled with ``run_id`` (running or not) on ``engine``."""
    listed = client(engine).container.list(all=True, filters=[("label", f"agentcompass.run_id={run_id}")])
    return [c.id for c in listed]
