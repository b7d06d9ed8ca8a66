"""Which image a spec runs: a named image (found locally or pulled), or one built from a build context.

A built image is tagged by a hash of everything that decides its content: the build context (paths, modes,
bytes), the Dockerfile's name, the build arguments, and the image id each of its ``FROM`` lines resolves to
now, so a base rebuilt under the same tag builds the image again instead of serving the old one. An image
found under its tag is reused, and the log says so (``docker.image_reused``, with the bases it was built
from).

Each image is resolved once per provider, however many specs or sessions ask for it. :meth:`Images.start`
(the provider's ``setup``) starts every build at once in the background, in the order the run's tasks are
queued, at most ``builds`` of them running together; a task waits only for its own image
(``EnvironmentProvider.ready``). A build past its time limit, or still running when the run ends, is killed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agentcompass.errors import EnvironmentUnavailable, describe
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.types import EnvironmentSpec
from python_on_whales.exceptions import DockerException, NoSuchImage

from agentcompass_docker.containers import LABEL_MANAGED
from agentcompass_docker.engine import Engine, detail
from agentcompass_docker.options import DEFAULT_BUILD_TIMEOUT, DockerOptions
from agentcompass_docker.registry import SharedLock, pull, push

T = TypeVar("T")

log = get_logger(plugin="docker")

BUILD_REPOSITORY = "agentcompass-build"
LABEL_CONTEXT_HASH = "agentcompass.context_hash"
#: The ids the Dockerfile's bases had when the image was built (JSON: ``{ref: id}``).
LABEL_BASES = "agentcompass.base_images"
#: What a base that is neither local nor pullable counts as in the key (the build then says what is wrong).
UNRESOLVED = "unresolved"


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


_ARG = re.compile(r"\$(?:\{(\w+)(?::?-([^}]*))?\}|(\w+))")


def dockerfile_bases(text: str, build_args: Mapping[str, str] | None = None) -> list[str]:
    """The images a Dockerfile's ``FROM`` lines (and ``COPY --from=IMAGE``) name, in order, each once: ``ARG``
    defaults declared before the first ``FROM`` (or ``build_args``) substituted; earlier stages (``FROM ... AS
    name``, or their number) and ``scratch`` left out."""
    args: dict[str, str] = {}
    given = dict(build_args or {})
    stages: set[str] = set()
    bases: list[str] = []
    seen_from = False
    for line in re.sub(r"\\\r?\n", " ", text).splitlines():
        words = line.strip().split()
        if not words or words[0].startswith("#"):
            continue
        keyword = words[0].upper()
        if keyword == "ARG" and not seen_from and len(words) > 1:
            name, _, default = words[1].partition("=")
            args[name] = given.get(name, default.strip('"').strip("'"))
        elif keyword == "FROM":
            seen_from = True
            rest = [w for w in words[1:] if not w.startswith("--")]
            if not rest:
                continue
            ref = _ARG.sub(lambda m: args.get(m.group(1) or m.group(3), m.group(2) or ""), rest[0])
            if len(rest) >= 3 and rest[1].upper() == "AS":
                stages.add(rest[2].lower())
            _add_base(bases, stages, ref)
        elif keyword in ("COPY", "ADD"):
            for word in words[1:]:
                if word.startswith("--from="):
                    _add_base(bases, stages, word.removeprefix("--from="))
    return bases


def _add_base(bases: list[str], stages: set[str], ref: str) -> None:
    if ref and ref.lower() not in stages and ref.lower() != "scratch" and not ref.isdigit() and ref not in bases:
        bases.append(ref)


def image_key(context_digest: str, bases: Mapping[str, str], build_args: Mapping[str, str]) -> str:
    """The cache key of a built image: the context's hash, the bases' image ids and the build arguments."""
    digest = hashlib.sha256(b"agentcompass-image-v2\0" + context_digest.encode() + b"\0")
    digest.update(json.dumps([sorted(bases.items()), sorted(build_args.items())]).encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class ImageInfo:
    """A resolved image: what to run and the user its configuration names."""

    ref: str
    user: str
    built: bool = False


@dataclass(frozen=True)
class BuildPlan:
    """A build context resolved to its tag: the tag's image when one exists (``existing``), else what to build."""

    context: Path
    dockerfile: str
    build_args: Mapping[str, str]
    tag: str
    context_digest: str
    bases: Mapping[str, str] = field(default_factory=dict)
    existing: ImageInfo | None = None


class Images:
    """Resolves (and builds) the images of one provider's specs, each once."""

    def __init__(self, engine: Engine, options: DockerOptions) -> None:
        self.engine = engine
        self.options = options
        self._futures: dict[tuple[Any, ...], asyncio.Future[ImageInfo]] = {}
        self._turns = BuildTurns(options.build_slots)
        self._building: dict[str, asyncio.Future[ImageInfo]] = {}
        self._closed = threading.Event()
        #: How this machine is named in progress and failures.
        self.node = options.node or socket.gethostname()
        #: Held while this machine pulls-or-builds a tag with a registry (see :meth:`share_builds`).
        self.shared_lock: SharedLock | None = None
        #: Images pulled from the registry instead of built here.
        self.pulled = 0
        #: The id each base image resolved to, asked of the engine once per provider (one run) however many
        #: build contexts name it; one lock per reference, so contexts planned together ask once.
        self._base_ids: dict[str, str] = {}
        self._base_locks: dict[str, threading.Lock] = {}
        self._base_guard = threading.Lock()

    @property
    def builds(self) -> int:
        """How many images were built (not found by their tag)."""
        done = [f for f in self._futures.values() if f.done() and not f.cancelled() and f.exception() is None]
        return sum(1 for f in done if f.result().built)

    def start(self, specs: list[EnvironmentSpec]) -> list[asyncio.Future[ImageInfo]]:
        """Start resolving every spec's image (builds in the order given); the named images' futures (which
        a run waits for: a missing one stops it before any task starts)."""
        named = []
        for spec in specs:
            future = self.image_for(spec)
            if spec.build_context:
                future.add_done_callback(_consume)  # its tasks report a failure; nobody else need see it
            else:
                named.append(future)
        return named

    def image_for(self, spec: EnvironmentSpec) -> asyncio.Future[ImageInfo]:
        """The image ``spec`` runs (a build runs once however many ask)."""
        if spec.build_context:
            context = str(Path(spec.build_context).resolve())
            build_args = dict(spec.build_args)
            key: tuple[Any, ...] = ("build", context, spec.dockerfile, tuple(sorted(build_args.items())))
        else:
            key = ("image", spec.image)
        future = self._futures.get(key)
        if future is None:
            if key[0] == "build":
                turn = self._turns.ticket()
                future = asyncio.ensure_future(
                    self._built(Path(key[1]), key[2], build_args, spec.build_timeout, turn))
                # Settled however it ends, even cancelled before its coroutine ever ran (a no-op otherwise).
                future.add_done_callback(lambda _: self._turns.skip(turn))
            else:
                future = asyncio.ensure_future(_within(
                    self.engine.call(self._resolve, spec.image),
                    self.options.pull_timeout,
                    f"pulling image {spec.image!r}",
                ))
            self._futures[key] = future
        return future

    def close(self) -> None:
        """The run is ending: kill builds still running, start no more."""
        self._closed.set()

    async def _built(self, context: Path, dockerfile: str, build_args: Mapping[str, str],
                     spec_timeout: float | None, turn: int) -> ImageInfo:
        """The image of a build context: found by its tag, else built (once per tag) in its ``turn``."""
        building: asyncio.Future[ImageInfo] | None = None
        try:
            plan = await _within(self.engine.call(self._plan_build, context, dockerfile, build_args),
                                 self.options.pull_timeout, f"resolving the base images of {context / dockerfile}")
            if plan.existing is not None:
                log.info("docker.image_reused", node=self.node, image=plan.tag, context=str(context),
                         bases=dict(plan.bases))
                return plan.existing
            shared = self._building.get(plan.tag)
            if shared is not None:  # another context of the same content: one build for both
                # Its turn goes first: the shared build may hold a later turn, which waits for this one.
                self._turns.skip(turn)
                return dataclasses.replace(await asyncio.shield(shared), built=False)
            building = self._building[plan.tag] = asyncio.ensure_future(
                self._obtain(plan, spec_timeout, turn))
            return await asyncio.shield(building)
        finally:
            if building is None:
                self._turns.skip(turn)  # nothing to build: the next build in line need not wait for this one

    async def _obtain(self, plan: BuildPlan, spec_timeout: float | None, turn: int) -> ImageInfo:
        """The image of ``plan``: built here, or with a registry pulled from it when another machine built
        it (and pushed there once built here), under the shared lock when there is one."""
        registry = self.options.registry
        if registry is None:
            return await self._build_in_turn(plan, spec_timeout, turn)
        if self.shared_lock is None:
            return await self._pull_or_build(registry, plan, spec_timeout, turn)
        async with self.shared_lock(plan.tag):
            return await self._pull_or_build(registry, plan, spec_timeout, turn)

    async def _pull_or_build(self, registry: str, plan: BuildPlan, spec_timeout: float | None,
                             turn: int) -> ImageInfo:
        if await self.engine.call(pull, self.engine.docker, registry, plan.tag, node=self.node):
            self._turns.skip(turn)
            self.pulled += 1
            user = await self.engine.call(lambda: self.engine.docker.image.inspect(plan.tag).config.user or "")
            return ImageInfo(plan.tag, user)
        built = await self._build_in_turn(plan, spec_timeout, turn)
        await self.engine.call(push, self.engine.docker, registry, plan.tag, node=self.node)
        return built

    async def _build_in_turn(self, plan: BuildPlan, spec_timeout: float | None, turn: int) -> ImageInfo:
        if self.options.build_timeout is not None:
            timeout, why = self.options.build_timeout, "--env-arg build_timeout"
        elif spec_timeout is not None:
            timeout, why = spec_timeout, "the task's build_timeout; --env-arg build_timeout=S overrides it"
        else:
            timeout, why = DEFAULT_BUILD_TIMEOUT, "the default; --env-arg build_timeout=S changes it"
        await self._turns.acquire(turn)
        try:
            return await self.engine.call(self._build, plan, timeout, why)
        finally:
            self._turns.release()

    # -- worker threads --------------------------------------------------------------------------------

    def _resolve(self, ref: str) -> ImageInfo:
        docker = self.engine.docker
        try:
            image = docker.image.inspect(ref)
        except NoSuchImage:
            registry = self.options.registry
            if registry is not None and pull(docker, registry, ref, node=self.node):
                self.pulled += 1
                return ImageInfo(ref, docker.image.inspect(ref).config.user or "")
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

    def _base_id(self, ref: str) -> str:
        """The image id ``ref`` resolves to (pulled first when it is missing and pulling is on), or
        :data:`UNRESOLVED`: asked of the engine once per provider (an unresolved one is asked again)."""
        with self._base_guard:
            lock = self._base_locks.setdefault(ref, threading.Lock())
        with lock:
            known = self._base_ids.get(ref)
            if known is not None:
                return known
            try:
                resolved = str(self._resolve_id(ref))
            except EnvironmentUnavailable:
                return UNRESOLVED
            self._base_ids[ref] = resolved
            return resolved

    def _resolve_id(self, ref: str) -> str:
        docker = self.engine.docker
        try:
            return str(docker.image.inspect(ref).id)
        except NoSuchImage:
            self._resolve(ref)  # pulls it (or says why not)
            return str(docker.image.inspect(ref).id)
        except DockerException as exc:
            raise EnvironmentUnavailable(f"cannot inspect image {ref!r}: {detail(exc)}") from None

    def _plan_build(self, context: Path, dockerfile: str, build_args: Mapping[str, str]) -> BuildPlan:
        path = context / dockerfile
        if not path.is_file():
            raise EnvironmentUnavailable(f"no {dockerfile} in build context {context}")
        text = path.read_text(encoding="utf-8", errors="replace")
        bases = {ref: self._base_id(ref) for ref in dockerfile_bases(text, build_args)}
        digest = context_hash(context, dockerfile)
        tag = f"{BUILD_REPOSITORY}:{image_key(digest, bases, build_args)[:32]}"
        plan = BuildPlan(context, dockerfile, dict(build_args), tag, digest, bases)
        try:
            image = self.engine.docker.image.inspect(tag)
        except NoSuchImage:
            return plan
        except DockerException as exc:
            raise EnvironmentUnavailable(f"cannot inspect image {tag}: {detail(exc)}") from None
        return BuildPlan(context, dockerfile, plan.build_args, tag, digest, bases,
                         existing=ImageInfo(tag, image.config.user or ""))

    def _build(self, plan: BuildPlan, timeout: float, why: str) -> ImageInfo:
        context = plan.context
        if self._closed.is_set():
            raise EnvironmentUnavailable(f"the image from {context} was not built: the run is ending")
        log.info("docker.image_building", node=self.node, image=plan.tag, context=str(context),
                 bases=dict(plan.bases))
        command = [*map(str, self.engine.docker.client_config.docker_cmd), "build", "--quiet",
                   "--file", str(context / plan.dockerfile), "--tag", plan.tag,
                   "--label", f"{LABEL_MANAGED}=1", "--label", f"{LABEL_CONTEXT_HASH}={plan.context_digest}",
                   "--label", f"{LABEL_BASES}={json.dumps(dict(plan.bases), sort_keys=True)}"]
        for key, value in plan.build_args.items():
            command += ["--build-arg", f"{key}={value}"]
        started = time.monotonic()
        returncode, stderr = _run_killable([*command, str(context)], timeout, self._closed)
        seconds = round(time.monotonic() - started, 3)
        if returncode is None:
            if self._closed.is_set():
                raise EnvironmentUnavailable(f"building the image from {context} was stopped: the run is ending")
            log.warning("docker.image_build_timeout", node=self.node, image=plan.tag, context=str(context),
                        seconds=seconds)
            raise EnvironmentUnavailable(
                f"building the image from {context} on {self.node} took longer than {timeout:g} s ({why})")
        if returncode != 0:
            lines = [line.strip() for line in stderr.splitlines() if line.strip()]
            log.warning("docker.image_build_failed", node=self.node, image=plan.tag, context=str(context),
                        seconds=seconds)
            raise EnvironmentUnavailable(
                f"building the image from {context} on {self.node} failed: "
                f"{lines[-1] if lines else f'exit status {returncode}'}")
        try:
            image = self.engine.docker.image.inspect(plan.tag)
        except DockerException as exc:
            raise EnvironmentUnavailable(f"cannot inspect the image built from {context}: {detail(exc)}") from None
        log.info("docker.image_built", node=self.node, image=plan.tag, context=str(context), seconds=seconds)
        return ImageInfo(plan.tag, image.config.user or "", built=True)


class BuildTurns:
    """Builds start in the order their images were asked for (the run's queue order), at most ``slots`` at
    once. Every ticket is settled exactly once: by :meth:`acquire` (the build starts) or :meth:`skip`
    (nothing to build: found by its tag, built by another context, or failed before building)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.running = 0
        self._issued = 0
        self._next = 0  # the lowest ticket not yet settled
        self._settled: set[int] = set()
        self._changed = asyncio.Event()

    def ticket(self) -> int:
        self._issued += 1
        return self._issued - 1

    def _settle(self, turn: int) -> None:
        self._settled.add(turn)
        while self._next in self._settled:
            self._settled.discard(self._next)
            self._next += 1
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def skip(self, turn: int) -> None:
        """Settle ``turn`` without a build (idempotent: a settled turn stays settled)."""
        if turn >= self._next and turn not in self._settled:
            self._settle(turn)

    async def acquire(self, turn: int) -> None:
        try:
            while not (self._next == turn and self.running < self.slots):
                await self._changed.wait()
        except BaseException:
            self.skip(turn)
            raise
        self.running += 1
        self._settle(turn)

    def release(self) -> None:
        self.running -= 1
        self._notify()


def _run_killable(command: list[str], timeout: float, stop: threading.Event) -> tuple[int | None, str]:
    """Run ``command``; its exit status and stderr, or ``(None, stderr)`` when it was killed: after ``timeout``
    seconds, or once ``stop`` is set. (The client's command starts with ``setsid``, which execs docker in a
    session of its own, so ``kill`` reaches docker itself.)"""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
    except OSError as exc:
        raise EnvironmentUnavailable(f"cannot run the docker CLI: {describe(exc)}") from None
    with proc:
        while True:
            try:
                _, stderr = proc.communicate(timeout=0.25)
                return proc.returncode, stderr.decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                pass
            if stop.is_set() or time.monotonic() - started >= timeout:
                proc.kill()
                _, stderr = proc.communicate()
                return None, stderr.decode("utf-8", "replace")


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def _within(work: Awaitable[T], seconds: float, what: str) -> T:
    try:
        return await asyncio.wait_for(work, seconds)
    except TimeoutError:
        raise EnvironmentUnavailable(f"{what} took longer than {seconds:.0f} s") from None
