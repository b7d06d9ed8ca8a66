"""Images that travel once (``--executor-arg registry=HOST:PORT``, with ``--env docker``).

Every node's docker environment gets the registry (``--env-arg registry=``): an image a node lacks is pulled
from ``REGISTRY/TAG`` before it is built, one built there is pushed. A named actor (:class:`BuildLocks`, one
per run) serialises the pull-or-build of each tag across the cluster, so the first node that needs an image
builds it and the others wait, then pull it. The head pushes the agents' bundles it built when the run
started, which the nodes' derived images name as a base.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.types import EnvironmentSpec, RunRequest

#: Seconds a node may hold a tag's lock (a build's default limit, and some) before another may take it.
LEASE_SECONDS = 4000.0
_BASE = re.compile(r"^\s*(?:FROM\s+(?:--\S+\s+)*(\S+)|COPY\s+.*--from=(\S+))", re.IGNORECASE | re.MULTILINE)


def with_registry(request: RunRequest, registry: str) -> RunRequest:
    """The request the nodes run: their docker environment pulls from and pushes to ``registry``."""
    return request.with_options(environment_args={**request.environment_args, "registry": registry})


class BuildLocks:
    """One lock per image tag, held by one node at a time (a Ray async actor). A lock whose node is gone, or
    held past :data:`LEASE_SECONDS`, is taken over."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[str, float]] = {}

    async def acquire(self, tag: str, node_id: str) -> None:
        while True:
            holder = self._held.get(tag)
            if holder is None or time.monotonic() > holder[1] or not await self._alive(holder[0]):
                self._held[tag] = (node_id, time.monotonic() + LEASE_SECONDS)
                return
            await asyncio.sleep(0.2)

    async def release(self, tag: str, node_id: str) -> None:
        if self._held.get(tag, ("",))[0] == node_id:
            del self._held[tag]

    async def _alive(self, node_id: str) -> bool:
        import ray

        nodes = await asyncio.to_thread(ray.nodes)
        return any(n.get("NodeID") == node_id and n.get("Alive") for n in nodes)


async def share_images(request: RunRequest, specs: Iterable[EnvironmentSpec], registry: str) -> tuple[RunRequest, Any]:
    """Set a run up to share its images through ``registry``: push the bases only the head has, start the
    run's :class:`BuildLocks` actor (it goes with the driver); the request the nodes run, and the actor."""
    import ray

    await asyncio.to_thread(publish_bases, list(specs), registry, request.environment_args.get("host") or None)
    locks = ray.remote(BuildLocks).options(num_cpus=0, max_concurrency=1000, max_restarts=0).remote()
    return with_registry(request, registry), locks


def cluster_lock(locks: Any, node_id: str) -> Callable[[str], AbstractAsyncContextManager[None]]:
    """``lock(tag)`` for a node's docker environment (``DockerProvider.share_builds``)."""

    @contextlib.asynccontextmanager
    async def lock(tag: str) -> AsyncIterator[None]:
        await locks.acquire.remote(tag, node_id)
        try:
            yield
        finally:
            await locks.release.remote(tag, node_id)

    return lock


def local_bases(specs: Iterable[EnvironmentSpec]) -> list[str]:
    """The bases (``FROM``, ``COPY --from=``) the specs' Dockerfiles name, in order, each once."""
    refs: list[str] = []
    for spec in specs:
        if not spec.build_context:
            continue
        path = Path(spec.build_context) / spec.dockerfile
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        stages = {m.lower() for m in re.findall(r"^\s*FROM\s+\S+\s+AS\s+(\S+)", text, re.I | re.M)}
        for match in _BASE.finditer(text):
            ref = match.group(1) or match.group(2)
            if ref and "$" not in ref and ref.lower() not in stages and ref.lower() != "scratch" \
                    and not ref.isdigit() and ref not in refs:
                refs.append(ref)
    return refs


def publish_bases(specs: Iterable[EnvironmentSpec], registry: str, docker_host: str | None) -> list[str]:
    """Push to ``registry`` every base of agentcompass's own (``agentcompass-*``: an agent's bundle) the specs'
    builds name that exists on this machine's engine only (built here: no registry digest); the images
    pushed."""
    log = get_logger()
    env = {**os.environ, **({"DOCKER_HOST": docker_host} if docker_host else {})}
    pushed = []
    for ref in local_bases(specs):
        if not ref.startswith("agentcompass-"):
            continue  # a base of the user's: on every node already, or pulled from the registry as REGISTRY/ref
        probe = subprocess.run(["docker", "image", "inspect", "--format", "{{len .RepoDigests}}", ref],
                               capture_output=True, text=True, env=env, timeout=60)
        if probe.returncode != 0 or probe.stdout.strip() != "0":
            continue  # not here (the nodes pull it themselves) or pulled from a registry they can reach too
        remote = f"{registry}/{ref}"
        started = time.monotonic()
        for argv in (["docker", "tag", ref, remote], ["docker", "push", "--quiet", remote]):
            done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=3600)
            if done.returncode != 0:
                lines = [line for line in done.stderr.splitlines() if line.strip()]
                log.warning("ray.image_publish_failed", node="head", image=ref, registry=registry,
                            error=lines[-1] if lines else f"exit status {done.returncode}")
                break
        else:
            pushed.append(ref)
            log.info("ray.image_published", node="head", image=ref, registry=registry,
                     seconds=round(time.monotonic() - started, 3))
    return pushed
