"""``--env-arg key=value`` options of the docker environment. Stdlib only: parsed before any docker import."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime.types import SECURITY_PROFILES

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
#: The values of ``exec``.
EXEC_MODES = ("server", "docker")
#: The values of ``engine``: which CLI (and so which engine) runs the containers.
ENGINES = ("docker", "podman")
#: The values of ``server``: which exec server containers run with ``exec=server``.
SERVERS = ("native", "python")
#: Seconds a build may take when neither the spec nor ``build_timeout`` says.
DEFAULT_BUILD_TIMEOUT = 3600.0
#: ``builds`` unset: this machine's CPUs, at most this many.
MAX_DEFAULT_BUILDS = 4
#: A registry's address: a host name or address, an optional port.
_REGISTRY = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?")


@dataclasses.dataclass(frozen=True)
class DockerOptions:
    """What ``--env-arg`` can set. Resource values, when given, override every task's
    :class:`~agentcompass.runtime.EnvironmentSpec`."""

    #: The container engine: ``docker`` (the ``docker`` CLI) or ``podman`` (the ``podman`` CLI, rootful or
    #: rootless; python-on-whales speaks both). Everything else works the same on either.
    engine: str = "docker"

    #: How commands and file operations reach the container: ``server`` (an exec server inside it, over a
    #: Unix socket: milliseconds per call) or ``docker`` (one ``docker exec`` per call, as before).
    exec: str = "server"
    #: Which exec server: ``native`` (a static binary built on this host from ``_exec_server.c``; the Python
    #: server where none can be built or run) or ``python`` (always the Python one, ``python3`` in the image).
    server: str = "native"
    #: Containers started ahead of the tasks that will take them (``exec=server`` only); unset: the run's
    #: concurrency (at most 8) when it is above 1, else none.
    prestart: int | None = None
    #: Leave containers running after close/teardown (for debugging); ``env prune`` removes them.
    keep: bool = False
    #: Memory limit for every container (docker syntax, e.g. ``4g``); default: the spec's.
    memory: str | None = None
    #: CPU limit for every container; default: the spec's.
    cpus: float | None = None
    #: Process limit for every container; default: the spec's.
    pids_limit: int | None = None
    #: Docker network for specs that ask for a network (``network=True``).
    network: str = "bridge"
    #: The image of the egress proxy an ``allowlist`` network policy starts (it needs ``python3``).
    egress_image: str = "python:3.11-slim"
    #: Docker daemon address (like ``DOCKER_HOST``) and CLI context.
    host: str | None = None
    context: str | None = None
    #: The security profile of every container, over what each spec asks (``EnvironmentSpec.security``):
    #: ``hardened`` (every capability dropped, ``no-new-privileges``) or ``docker`` (Docker's defaults).
    security: str | None = None
    #: Capabilities to add (comma-separated, e.g. ``CHOWN,DAC_OVERRIDE``) to the profile's: none under
    #: ``hardened``, Docker's default set under ``docker``.
    cap_add: tuple[str, ...] = ()
    #: The cgroup containers are created under (``--cgroup-parent``). ``auto``: the cgroup root when the engine
    #: uses the ``cgroupfs`` driver, so that each container competes for CPU as one host process does (under
    #: the engine's ``/docker`` group all containers together weigh as much as one host process: on a busy
    #: host a task's commands then wait for CPU far longer than under ``--env local``); the engine's default
    #: otherwise (``systemd`` slices). Empty: always the engine's default.
    cgroup_parent: str = "auto"
    #: Run ``docker-init`` as PID 1 (reaps zombies). Turn off only for engines without it.
    init: bool = True
    #: Try ``docker pull`` for a missing image.
    pull: bool = True
    #: Threads that run docker CLI calls; each running ``exec`` holds one.
    threads: int = 128
    #: Small writes are batched into the session's next docker call, or sent after this many seconds.
    #: 0 writes every file at once.
    write_delay: float = 0.05
    #: Containers whose removal may still be running when ``close`` returns (removal goes on in the
    #: background, off the task's path; teardown waits for all of it). 0: close waits for every removal.
    removal_backlog: int = 8
    #: Bounds, in seconds, on the engine's work.
    start_timeout: float = 120.0
    close_timeout: float = 60.0
    pull_timeout: float = 600.0
    #: Seconds a build may take, over every spec's ``build_timeout``; unset: the spec's, else
    #: :data:`DEFAULT_BUILD_TIMEOUT`.
    build_timeout: float | None = None
    #: Images built at once (the others wait their turn, in the order the run's tasks are queued); unset:
    #: this machine's CPUs, at most :data:`MAX_DEFAULT_BUILDS`.
    builds: int | None = None
    #: A registry (``HOST:PORT``) images travel through: an image this engine lacks is pulled from
    #: ``REGISTRY/TAG`` before it is built, and one built here is pushed there, so machines sharing the
    #: registry build each image once. Unset: every engine builds for itself.
    registry: str | None = None
    #: How this machine is named in image progress and failures (default: its host name; the ``ray``
    #: executor gives each node's address).
    node: str | None = None

    @property
    def build_slots(self) -> int:
        """Images built at once: ``builds``, else this machine's CPUs (at most :data:`MAX_DEFAULT_BUILDS`)."""
        return self.builds or max(1, min(MAX_DEFAULT_BUILDS, os.cpu_count() or 1))

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> DockerOptions:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in options.items():
            name = key.replace("-", "_")
            if name not in fields:
                raise UsageError(f"unknown docker environment option {key!r}; known: {', '.join(sorted(fields))}")
            try:
                values[name] = _convert(raw, str(fields[name].type))
            except ValueError as exc:
                raise UsageError(f"docker environment option {key}={raw!r}: {exc}") from None
        if values.get("exec", "server") not in EXEC_MODES:
            raise UsageError(
                f"docker environment option exec={values['exec']!r}: expected one of {', '.join(EXEC_MODES)}"
            )
        if values.get("engine", "docker") not in ENGINES:
            raise UsageError(
                f"docker environment option engine={values['engine']!r}: expected one of {', '.join(ENGINES)}"
            )
        if values.get("engine") == "podman" and values.get("context") is not None:
            raise UsageError("docker environment option context= is a Docker CLI context, which Podman does not "
                             "have: with engine=podman set host=URL (Podman's --url, e.g. "
                             "unix:///run/user/1000/podman/podman.sock) or CONTAINER_CONNECTION instead")
        if values.get("server", "native") not in SERVERS:
            raise UsageError(
                f"docker environment option server={values['server']!r}: expected one of {', '.join(SERVERS)}"
            )
        if (values.get("prestart") or 0) < 0:
            raise UsageError(f"docker environment option prestart={values['prestart']}: expected 0 or more")
        if values.get("security") is not None and values["security"] not in SECURITY_PROFILES:
            raise UsageError(f"docker environment option security={values['security']!r}: expected one of "
                             f"{', '.join(SECURITY_PROFILES)}")
        if values.get("builds") is not None and values["builds"] < 1:
            raise UsageError(f"docker environment option builds={values['builds']}: expected 1 or more")
        if values.get("build_timeout") is not None and not values["build_timeout"] > 0:
            raise UsageError(f"docker environment option build_timeout={values['build_timeout']}: expected a "
                             "positive number of seconds")
        registry = values.get("registry")
        if registry is not None and not _REGISTRY.fullmatch(registry):
            raise UsageError(f"docker environment option registry={registry!r}: expected HOST:PORT (or HOST), "
                             "e.g. registry=127.0.0.1:5000, with no scheme or path")
        return cls(**values)


def _convert(raw: Any, annotation: str) -> Any:
    text = str(raw).strip() if not isinstance(raw, (list, tuple)) else ",".join(raw)
    if annotation == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError("expected true or false")
    if annotation.startswith("tuple"):
        return tuple(part.strip() for part in text.split(",") if part.strip())
    if not text and annotation.endswith("None"):
        return None
    if annotation.startswith("int"):
        try:
            return int(text)
        except ValueError:
            raise ValueError("expected a whole number") from None
    if annotation.startswith("float"):
        try:
            return float(text)
        except ValueError:
            raise ValueError("expected a number") from None
    return text
