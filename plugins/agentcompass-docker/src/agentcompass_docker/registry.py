"""Images that travel through a registry (``--env-arg registry=HOST:PORT``): an image this engine lacks is
pulled from ``REGISTRY/TAG`` and tagged ``TAG``; one built here is tagged ``REGISTRY/TAG`` and pushed. So
machines that share the registry (the nodes of a ``ray`` run) build each image once.

Blocking calls, for the engine's worker threads. A registry that cannot be reached never fails a task: the
image is built here instead (and the warning names the machine, the image and the registry's answer).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from agentcompass.runtime.logs import get_logger
from python_on_whales.exceptions import DockerException

from agentcompass_docker.engine import detail

log = get_logger(plugin="docker")

#: What a registry's (or the CLI's) answer says when the image is simply not there.
_ABSENT = ("not found", "manifest unknown", "does not exist", "name unknown")

#: ``lock(tag)``: an async context manager held while one machine pulls-or-builds ``tag``, so the machines
#: sharing a registry build each tag once (the ``ray`` executor gives one that spans the cluster).
SharedLock = Callable[[str], AbstractAsyncContextManager[Any]]


def remote_ref(registry: str, ref: str) -> str:
    """``ref``'s name in ``registry``: ``REGISTRY/ref`` (a reference by digest has none: it is returned as is)."""
    return ref if "@" in ref else f"{registry}/{ref}"


def pull(docker: Any, registry: str, ref: str, *, node: str) -> bool:
    """Pull ``REGISTRY/ref`` and tag it ``ref``; False when the registry has no such image (or cannot be
    reached: a warning says so)."""
    if "@" in ref:
        return False
    remote = remote_ref(registry, ref)
    started = time.monotonic()
    try:
        docker.image.pull(remote, quiet=True)
        docker.image.tag(remote, ref)
    except DockerException as exc:
        why = detail(exc)
        if not any(word in why.lower() for word in _ABSENT):
            log.warning("docker.registry_pull_failed", node=node, image=ref, registry=registry, error=why)
        return False
    log.info("docker.image_pulled", node=node, image=ref, registry=registry,
             seconds=round(time.monotonic() - started, 3))
    return True


def push(docker: Any, registry: str, ref: str, *, node: str) -> bool:
    """Tag ``ref`` as ``REGISTRY/ref`` and push it; False (with a warning naming the machine, the image and
    the registry's answer) when that fails: the image is still here, only the others build it too."""
    remote = remote_ref(registry, ref)
    started = time.monotonic()
    try:
        docker.image.tag(ref, remote)
        docker.image.push(remote, quiet=True)
    except DockerException as exc:
        log.warning("docker.registry_push_failed", node=node, image=ref, registry=registry, error=detail(exc),
                    hint="a registry on another machine must be in dockerd's --insecure-registry list (or "
                         "serve TLS); loopback ones are insecure by default")
        return False
    log.info("docker.image_pushed", node=node, image=ref, registry=registry,
             seconds=round(time.monotonic() - started, 3))
    return True
