"""Which image a spec runs: a named image (found locally or pulled), or one built from a build context and
tagged by the context's content hash, so an unchanged context is never built twice. Each is resolved once
per provider, however many specs or sessions ask for it."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from agentcompass.errors import EnvironmentUnavailable
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.types import EnvironmentSpec
from python_on_whales.exceptions import DockerException, NoSuchImage

from agentcompass_docker.containers import LABEL_MANAGED
from agentcompass_docker.engine import Engine, detail
from agentcompass_docker.options import DockerOptions

T = TypeVar("T")

log = get_logger(plugin="docker")

BUILD_REPOSITORY = "agentcompass-build"
LABEL_CONTEXT_HASH = "agentcompass.context_hash"


def context_hash(context: Path, dockerfile: str) -> str:
    """A content hash of a build context: paths, kinds, executable bits, symlink targets, file bytes."""
    digest = hashlib.sha256(b"agentcompass-build-v1\0" + dockerfile.encode() + b"\0")
    for root, dirs, files in os.walk(context):
        dirs.sort()
        for name in sorted(dirs + files):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, context).replace(os.sep, "/")
            if os.path.islink(full):
                digest.update(b"L" + rel.encode() + b"\0" + os.readlink(full).encode() + b"\0")
            elif os.path.isdir(full):
                digest.update(b"D" + rel.encode() + b"\0")
            else:
                mode = b"x" if os.access(full, os.X_OK) else b"-"
                digest.update(b"F" + rel.encode() + b"\0" + mode)
                with open(full, "rb") as f:
                    digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()


@dataclass(frozen=True)
class ImageInfo:
    """A resolved image: what to run and the user its configuration names."""

    ref: str
    user: str
    built: bool = False


class Images:
    """Resolves (and builds) the images of one provider's specs, each once."""

    def __init__(self, engine: Engine, options: DockerOptions) -> None:
        self.engine = engine
        self.options = options
        self._futures: dict[tuple[str, ...], asyncio.Future[ImageInfo]] = {}

    @property
    def builds(self) -> int:
        """How many images were built (not found by their content-hash tag)."""
        done = [f for f in self._futures.values() if f.done() and not f.cancelled() and f.exception() is None]
        return sum(1 for f in done if f.result().built)

    def image_for(self, spec: EnvironmentSpec) -> asyncio.Future[ImageInfo]:
        """The image ``spec`` runs (a build runs once however many ask)."""
        if spec.build_context:
            context = str(Path(spec.build_context).resolve())
            key: tuple[str, ...] = ("build", context, spec.dockerfile)
        else:
            key = ("image", spec.image)
        future = self._futures.get(key)
        if future is None:
            if key[0] == "build":
                work = _within(
                    self.engine.call(self._build, Path(key[1]), key[2]),
                    self.options.build_timeout,
                    f"building the image from {key[1]}",
                )
            else:
                work = _within(
                    self.engine.call(self._resolve, spec.image),
                    self.options.pull_timeout,
                    f"pulling image {spec.image!r}",
                )
            future = asyncio.ensure_future(work)
            self._futures[key] = future
        return future

    # -- worker threads --------------------------------------------------------------------------------

    def _resolve(self, ref: str) -> ImageInfo:
        docker = self.engine.docker
        try:
            image = docker.image.inspect(ref)
        except NoSuchImage:
            if not self.options.pull:
                raise EnvironmentUnavailable(f"image {ref!r} is not available locally (pulling is off)") from None
            started = time.monotonic()
            try:
                docker.image.pull(ref, quiet=True)
                image = docker.image.inspect(ref)
            except DockerException as exc:
                raise EnvironmentUnavailable(
                    f"image {ref!r} is not available locally and cannot be pulled: {detail(exc)}"
                ) from None
            log.info("docker.image_pulled", image=ref, seconds=round(time.monotonic() - started, 3))
        except DockerException as exc:
            raise EnvironmentUnavailable(f"cannot inspect image {ref!r}: {detail(exc)}") from None
        return ImageInfo(ref, image.config.user or "")

    def _build(self, context: Path, dockerfile: str) -> ImageInfo:
        if not (context / dockerfile).is_file():
            raise EnvironmentUnavailable(f"no {dockerfile} in build context {context}")
        docker = self.engine.docker
        digest = context_hash(context, dockerfile)
        tag = f"{BUILD_REPOSITORY}:{digest[:32]}"
        try:
            image = docker.image.inspect(tag)
            log.debug("docker.image_reused", image=tag, context=str(context))
            return ImageInfo(tag, image.config.user or "")
        except NoSuchImage:
            pass
        except DockerException as exc:
            raise EnvironmentUnavailable(f"cannot inspect image {tag}: {detail(exc)}") from None
        log.info("docker.image_building", image=tag, context=str(context))
        started = time.monotonic()
        try:
            image = docker.legacy_build(
                context,
                file=context / dockerfile,
                tags=[tag],
                labels={LABEL_MANAGED: "1", LABEL_CONTEXT_HASH: digest},
            )
        except DockerException as exc:
            raise EnvironmentUnavailable(f"building the image from {context} failed: {detail(exc)}") from None
        log.info("docker.image_built", image=tag, context=str(context), seconds=round(time.monotonic() - started, 3))
        return ImageInfo(tag, image.config.user or "", built=True)


async def _within(work: Awaitable[T], seconds: float, what: str) -> T:
    try:
        return await asyncio.wait_for(work, seconds)
    except TimeoutError:
        raise EnvironmentUnavailable(f"{what} took longer than {seconds:.0f} s") from None
