"""Containers on the engine: how one is made for a task (isolation defaults, labels, the keeper), creating and
starting it, removing it, finding what a run left by its labels, and telling whether one is still there.

Every container the provider creates is accounted for until it is removed or handed to a session: a create
still in flight when the run ends (or whose caller gave up) removes its container itself, in its own worker
thread, as soon as the engine answers. :meth:`Containers.sweep` (teardown) stops new creates, waits for those
in flight and for removals under way, then removes whatever still carries the run's label.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import secrets
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcompass.errors import EnvironmentUnavailable, InfrastructureError
from agentcompass.runtime.environment import PruneReport
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.names import safe_name
from agentcompass.runtime.owned_dirs import identity, owner_alive, read_owner
from agentcompass.runtime.types import EnvironmentSpec
from python_on_whales.exceptions import DockerException, NoSuchContainer

from agentcompass_docker import _scripts, exec_dirs
from agentcompass_docker.engine import Engine, detail, start_hint
from agentcompass_docker.options import DockerOptions

log = get_logger(plugin="docker")

LABEL_MANAGED = "agentcompass.managed"
LABEL_RUN = "agentcompass.run_id"
LABEL_TASK = "agentcompass.task_id"
#: On containers started ahead of their task (the warm pool), instead of the task label.
LABEL_POOL = "agentcompass.pool"
#: The host directory of the container's exec server (removed with it, also by ``env prune``).
LABEL_EXEC_DIR = "agentcompass.exec_dir"
#: The process that made the container, ``HOST/PID/START`` (:func:`owner_label`): ``env prune`` leaves a
#: container whose process still runs.
LABEL_OWNER = "agentcompass.owner"


def owner_label(pid: int | None = None) -> str:
    """``HOST/PID/START`` of the process ``pid`` (this one by default): its host, pid and start time (``-``
    where ``/proc`` does not tell), which together tell it from a later process given the same pid."""
    owner = identity(os.getpid() if pid is None else pid)
    start = owner["start"]
    return f"{socket.gethostname()}/{owner['pid']}/{'-' if start is None else start}"


def owner_state(label: str, exec_dir: str = "") -> tuple[str, int | None]:
    """Whether the process a container's owner label names runs (``"alive"``), is gone (``"gone"``), or cannot
    be told from here (``"unknown"``: no label, made by an older agentcompass, or on another host); with the
    pid when known. A container without the label is judged by its exec directory's ``owner.json``."""
    parts = label.split("/") if label else []
    if len(parts) == 3 and parts[1].isdigit():
        host, pid, start = parts[0], int(parts[1]), parts[2]
        if host != socket.gethostname():
            return "unknown", pid
        owner = {"pid": pid, "start": int(start) if start.isdigit() else None}
        return ("alive" if owner_alive(owner) else "gone"), pid
    recorded = read_owner(Path(exec_dir)) if exec_dir else None
    if recorded is not None and isinstance(recorded.get("pid"), int):
        return ("alive" if owner_alive(recorded) else "gone"), recorded["pid"]
    return "unknown", None


def label_field(engine: str, label: str) -> str:
    """The ``ps --format`` template of one label's value: Docker's ``.Label`` function, or Podman's map."""
    return f'{{{{index .Labels "{label}"}}}}' if engine == "podman" else f'{{{{.Label "{label}"}}}}'


@functools.cache
def server_source() -> str:
    """The exec server's program text, sent to the container as ``python3 -c`` source."""
    return Path(__file__).with_name("_exec_server.py").read_text(encoding="utf-8")

#: Seconds the teardown sweep waits for sessions being ended by their exec server (each answers within 2 s, but
#: on the event loop, which may have stopped): then ``rm -f`` whatever is left.
ENDING_WAIT = 3.0

#: Engine messages on removal that mean there is nothing left to do.
_REMOVED_ALREADY = ("no such container", "already in progress")


def _note(level: str, event: str, **fields: Any) -> None:
    """Log, never raise: removal runs on every path, also after the run's log has been closed."""
    with contextlib.suppress(Exception):
        getattr(log, level)(event, **fields)


def is_root(user: str) -> bool:
    return user.split(":", 1)[0] in ("", "0", "root")


@dataclass(frozen=True)
class ContainerPlan:
    """What to create for one task attempt."""

    name: str
    image: str
    command: list[str]
    create: dict[str, Any]
    #: The session's user (``exec`` and file operations run as it).
    user: str
    memory: str
    #: The gateway forwarder's port inside the container, or None.
    forward_port: int | None
    #: Started with ``--rm``: the engine removes it once it stops (``exec=server``: the server's ``shutdown``
    #: ends a session without a docker call).
    autoremove: bool = False


def plan_container(
    spec: EnvironmentSpec,
    options: DockerOptions,
    *,
    image: str,
    image_user: str,
    run_id: str,
    task_id: str,
    base_env: Mapping[str, str],
    gateway: tuple[str, int] | None,
    exec_dir: str | None = None,
) -> ContainerPlan:
    """The container for one attempt: the spec's limits (or the options'), no network unless asked, the
    spec's security profile (or the options'): ``hardened``, every capability dropped and
    ``no-new-privileges``; ``docker``, Docker's default capabilities and setuid working (never privileged
    either way; ``cap_add`` adds to both), labels naming the run and task, and the keeper as its program.

    With ``exec_dir`` (``exec=server``) the program is the exec server, run as the session's user, with that
    directory (and nothing else) mounted; the base environment is then sent with each ``exec`` instead (so a
    container can be started before its task is known: an empty ``task_id`` makes a pool container, labelled
    ``agentcompass.pool=1``), and the container runs with ``--rm`` (unless ``keep``): closing its session asks
    the server to end it, and the engine removes it."""
    user = spec.user or image_user or "0"
    memory = options.memory or spec.memory
    hardened = (options.security or spec.security) == "hardened"
    task_part = safe_name(task_id, 40, sep="-", distinct=False) if task_id else "pool"
    name = f"ac-{safe_name(run_id, 20, sep='-', distinct=False)}-{task_part}-{secrets.token_hex(3)}"
    labels = {LABEL_MANAGED: "1", LABEL_RUN: run_id, LABEL_OWNER: owner_label()}
    labels.update({LABEL_TASK: task_id} if task_id else {LABEL_POOL: "1"})
    mounts: list[list[str]] = []
    tmpfs: list[str] = []
    command = ["sh", "-c", _scripts.KEEPER, "ac-keeper"]
    main_user = user
    if spec.read_only:
        # Only the working directory (a volume, so the image's content there stays) and /tmp are writable.
        mounts.append(["type=volume", f"destination={spec.workdir}"])
        tmpfs.append("/tmp:rw,exec,nosuid,nodev,mode=1777")
    forward_port = None
    envs = {**base_env, **spec.env}
    if exec_dir is not None:
        envs = dict(spec.env)
        labels[LABEL_EXEC_DIR] = exec_dir
        mounts.append(["type=bind", f"source={exec_dir}", f"target={exec_dirs.CONTAINER_DIR}"])
        command = ["sh", "-c", _scripts.SERVER_KEEPER, "ac-server", server_source(),
                   f"{exec_dirs.CONTAINER_DIR}/{exec_dirs.SOCKET_NAME}"]
        if gateway is not None:
            # The host relays the gateway through the exec directory; the server forwards 127.0.0.1:port to it.
            forward_port = gateway[1]
            command += [f"{exec_dirs.CONTAINER_DIR}/{exec_dirs.GATEWAY_NAME}", str(forward_port)]
    elif gateway is not None:
        socket_path, forward_port = gateway
        mounts.append(["type=bind", f"source={socket_path}", f"target={_scripts.GATEWAY_SOCKET}", "readonly"])
        command += [_scripts.FORWARDER, _scripts.GATEWAY_SOCKET, str(forward_port)]
        # The forwarder runs as the host's user, who can always open the gateway's socket.
        main_user = f"{os.getuid()}:{os.getgid()}"
    create: dict[str, Any] = dict(
        name=name,
        labels=labels,
        envs=envs,
        # Podman, unlike Docker, refuses a --workdir the image lacks: the provider makes it after the start.
        workdir=spec.workdir if options.engine == "docker" else None,
        user=main_user,
        networks=[options.network if spec.network else "none"],
        memory=memory,
        memory_swap=memory,  # no swap: past the limit, the OOM killer acts
        cpus=options.cpus or spec.cpus,
        pids_limit=options.pids_limit or spec.pids_limit,
        cap_drop=["ALL"] if hardened else [],
        cap_add=list(options.cap_add),
        security_options=["no-new-privileges"] if hardened else [],
        privileged=False,
        read_only=spec.read_only,
        tmpfs=tmpfs,
        mounts=mounts,
        init=options.init,
        cgroup_parent=options.cgroup_parent if options.cgroup_parent not in ("", "auto") else None,
        pull="never",
        remove=exec_dir is not None and not options.keep,
        gpus=spec.gpus or None,
        storage=spec.storage,
    )
    return ContainerPlan(name, image, command, create, user, memory or "none", forward_port,
                         autoremove=create["remove"])


def run_arguments(plan: ContainerPlan) -> list[str]:
    """The ``docker run --detach`` arguments of ``plan`` (the options ``plan.create`` names, as
    python-on-whales's ``create`` would pass them)."""
    c = plan.create
    args = ["run", "--detach", "--name", c["name"]]
    for key, value in c["labels"].items():
        args += ["--label", f"{key}={value}"]
    for key, value in c["envs"].items():
        args += ["--env", f"{key}={value}"]
    if c["workdir"] is not None:
        args += ["--workdir", c["workdir"]]
    args += ["--user", c["user"]]
    for network in c["networks"]:
        args += ["--network", network]
    if c["memory"] is not None:
        args += ["--memory", str(c["memory"]), "--memory-swap", str(c["memory_swap"])]
    if c["cpus"] is not None:
        args += ["--cpus", str(c["cpus"])]
    if c["pids_limit"] is not None:
        args += ["--pids-limit", str(c["pids_limit"])]
    for cap in c["cap_drop"]:
        args += ["--cap-drop", cap]
    for cap in c["cap_add"]:
        args += ["--cap-add", cap]
    for option in c["security_options"]:
        args += ["--security-opt", option]
    if c["privileged"]:
        args.append("--privileged")
    if c["read_only"]:
        args.append("--read-only")
    for tmpfs in c["tmpfs"]:
        args += ["--tmpfs", tmpfs]
    for mount in c["mounts"]:
        args += ["--mount", ",".join(mount)]
    if c["init"]:
        args.append("--init")
    if c.get("cgroup_parent"):
        args += ["--cgroup-parent", c["cgroup_parent"]]
    if c.get("remove"):
        args.append("--rm")
    if c.get("gpus"):
        args += ["--gpus", str(c["gpus"])]
    if c.get("storage"):
        args += ["--storage-opt", f"size={c['storage']}"]
    args += ["--pull", c["pull"], plan.image, *plan.command]
    return args


@dataclass
class CreateTicket:
    """One create in flight. :meth:`Containers.abandon` it when its caller gives up."""

    name: str
    container_id: str | None = None
    abandoned: bool = False


class Containers:
    """Creates and removes one provider's containers, and knows which are still in flight.

    :param timeout: seconds any one removal or listing may take (clean-up ends even when the engine hangs).
    :param start_timeout: seconds a create-and-start may take.
    """

    def __init__(self, engine: Engine, timeout: float = 60.0, start_timeout: float = 120.0) -> None:
        self.engine = engine
        self.timeout = timeout
        self.start_timeout = start_timeout
        #: The engine refused a storage limit (``--storage-opt``): later containers are created without one.
        self.storage_unsupported = False
        self._cond = threading.Condition()
        self._creating = 0
        self._removing = 0
        self._closed = False
        #: Containers asked to stop (their exec server's ``shutdown``) that the engine removes itself.
        self._retiring: set[str] = set()
        self._ending = 0  # shutdown requests under way (on the event loop)

    # -- create (worker threads) -----------------------------------------------------------------------

    def create_and_start(self, plan: ContainerPlan, ticket: CreateTicket) -> str:
        """Create and start ``plan``'s container; its id. If the run is ending or the caller gave up by the
        time the engine answers, the container is removed here and :class:`InfrastructureError` raised."""
        with self._cond:
            if self._closed:
                raise InfrastructureError("the run is ending: no new containers are started")
            self._creating += 1
        try:
            container_id = self._create_and_start(plan)
            with self._cond:
                ticket.container_id = container_id
                drop = ticket.abandoned or self._closed
            if drop:
                self.remove_quietly(container_id)
                raise InfrastructureError(f"container {plan.name} was removed: its run ended or its caller gave up")
            return container_id
        finally:
            with self._cond:
                self._creating -= 1
                self._cond.notify_all()

    def _probe_start(self, name: str) -> bool:
        """``docker start NAME`` for :meth:`Engine.cli`'s probe: False while no container has that name yet (a
        slow create: rootless Podman on ``vfs`` copies the image for every container), so it is asked again;
        another failure raises :class:`DockerException`."""
        try:
            self.engine.cli(["start", name], self.timeout)
        except DockerException as exc:
            if "no such container" in detail(exc).lower() or "no container with name" in detail(exc).lower():
                return False
            raise
        return True

    def _create_and_start(self, plan: ContainerPlan) -> str:
        """``docker run --detach``: create and start in one CLI call (a CLI process costs the engine's host
        tens of milliseconds of CPU, which counts when many containers start at once)."""
        if plan.create.get("storage") and not self.storage_unsupported and self.engine.storage_limits is False:
            # The engine's storage driver cannot limit storage (``docker info``: overlay2 on a filesystem other
            # than xfs): said once, and no create is tried (and refused) with a limit first.
            with self._cond:
                told, self.storage_unsupported = self.storage_unsupported, True
            if not told:
                _note("warning", "docker.storage_limit_unsupported", storage=plan.create["storage"],
                      error="the engine's storage driver cannot limit a container's storage (overlay2 limits it "
                            "only on xfs mounted with pquota)")
        if plan.create.get("storage") and self.storage_unsupported:
            plan = dataclasses.replace(plan, create={**plan.create, "storage": None})
        try:
            # ``--rm``: a start the daemon refused leaves the CLI waiting (for a removal that never comes); asking
            # `docker start` of a slow one tells (it fails the same way at once) and ends the wait.
            probe = functools.partial(self._probe_start, plan.name) if plan.autoremove else None
            output = self.engine.cli(run_arguments(plan), self.start_timeout, probe=probe)
        except (DockerException, EnvironmentUnavailable) as exc:
            self.remove_quietly(plan.name)  # a created container that did not start may exist under its name
            if isinstance(exc, EnvironmentUnavailable):
                raise DockerException(["docker", "run"], 1, None, str(exc).encode()) from None
            said = " ".join(str(getattr(exc, "stderr", None) or detail(exc)).split())
            if plan.create.get("storage") and "--storage-opt is supported only" in said:
                # The engine cannot limit storage (it needs overlay2 on xfs with pquota): said once, run without.
                self.storage_unsupported = True
                _note("warning", "docker.storage_limit_unsupported", storage=plan.create["storage"],
                      error=said[:300])
                return self._create_and_start(dataclasses.replace(plan, create={**plan.create, "storage": None}))
            if plan.create.get("gpus") and "could not select device driver" in said:
                raise DockerException(["docker", "run"], 1, None, (
                    f"the task asks for {plan.create['gpus']} GPU(s) and this docker engine has none to give "
                    f"(no GPU runtime: install the NVIDIA container toolkit, or run it where there are GPUs): "
                    f"{said[:300]}").encode()) from None
            raise
        lines = output.strip().splitlines()
        if not lines:
            self.remove_quietly(plan.name)
            raise DockerException(["docker", "run"], 1, None, b"docker run printed no container id")
        return lines[-1].strip()

    def abandon(self, ticket: CreateTicket) -> None:
        """The caller of a create gives up (timeout, cancellation): its container must not outlive it."""
        with self._cond:
            ticket.abandoned = True
            container_id = ticket.container_id
        if container_id is not None:  # started before the caller gave up: nobody else will remove it
            self.engine.submit(self.remove_quietly, container_id)

    # -- remove (worker threads) -----------------------------------------------------------------------

    def remove_quietly(self, container: str) -> None:
        """``rm -f`` with its anonymous volumes; a container already gone is no error."""
        with self._cond:
            self._removing += 1
        try:
            self.engine.cli(["rm", "--force", "--volumes", container], self.timeout)
        except DockerException as exc:
            if not any(m in detail(exc).lower() for m in _REMOVED_ALREADY):
                _note("warning", "docker.remove_failed", container=container, error=detail(exc))
        except EnvironmentUnavailable as exc:
            _note("warning", "docker.remove_failed", container=container, error=str(exc))
        finally:
            with self._cond:
                self._removing -= 1
                self._cond.notify_all()

    def expect_removals(self, count: int) -> None:
        """``count`` more (or, negative, fewer) removals are queued: :meth:`sweep` waits for them too."""
        with self._cond:
            self._removing += count
            self._cond.notify_all()

    def remove_many(self, containers: list[str]) -> None:
        """``rm -f`` several containers in one CLI call (one by one, quietly, if that fails)."""
        if len(containers) <= 1:
            for container in containers:
                self.remove_quietly(container)
            return
        with self._cond:
            self._removing += len(containers)
        try:
            self.engine.cli(["rm", "--force", "--volumes", *containers], self.timeout + 0.5 * len(containers))
        except (DockerException, EnvironmentUnavailable):  # one was gone already, say: each on its own
            for container in containers:
                self.remove_quietly(container)
        finally:
            with self._cond:
                self._removing -= len(containers)
                self._cond.notify_all()

    def expect_ends(self, count: int) -> None:
        """``count`` more (or, negative, fewer) containers are being ended by their exec server: :meth:`sweep`
        waits for them, briefly (:data:`ENDING_WAIT`)."""
        with self._cond:
            self._ending += count
            self._cond.notify_all()

    def retire(self, container_id: str) -> None:
        """``container_id`` (run with ``--rm``) is stopping: the engine removes it, :meth:`await_retired` and
        :meth:`sweep` wait for that."""
        with self._cond:
            self._retiring.add(container_id)

    def await_retired(self, wait: float) -> None:
        """Wait (at most ``wait`` s) until the engine has removed every retiring container: one listing per
        look, whatever their number (what is left after ``wait`` the sweep removes)."""
        deadline = time.monotonic() + wait
        delay = 0.02
        listing = ["ps", "--all", "--no-trunc", "--quiet", "--filter", f"label={LABEL_MANAGED}=1"]
        while True:
            with self._cond:
                waiting = set(self._retiring)
            if not waiting:
                return
            try:
                listed = set(self.engine.cli(listing, self.timeout).split())
            except (DockerException, EnvironmentUnavailable):
                return
            with self._cond:
                self._retiring -= waiting - listed
                if not self._retiring & waiting:
                    return
            if time.monotonic() + delay > deadline:
                return
            time.sleep(delay)
            delay = min(2 * delay, 0.25)

    def prune(self, run_id: str | None, *, owned_too: bool = False) -> PruneReport:
        """Remove containers agentcompass started (``agentcompass.managed=1``), only the run's when
        ``run_id`` is given, running or not, with their anonymous volumes — but not those whose owner process
        still runs (:func:`owner_state`), nor, without ``run_id``, those whose owner cannot be told; those are
        named in the report. ``owned_too``: remove the run's containers whoever owns them (the run's own
        teardown sweep)."""
        filters = ["--filter", f"label={LABEL_MANAGED}=1"]
        if run_id:
            filters += ["--filter", f"label={LABEL_RUN}={run_id}"]
        fields = ["{{.ID}}", "{{.Names}}", *(label_field(self.engine.name, label)
                                             for label in (LABEL_RUN, LABEL_OWNER, LABEL_EXEC_DIR))]
        listing = ["ps", "--all", "--no-trunc", "--format", "\t".join(fields), *filters]
        try:
            rows = [(line.split("\t") + [""] * 5)[:5]
                    for line in self.engine.cli(listing, self.timeout).splitlines() if line.strip()]
        except (DockerException, EnvironmentUnavailable) as exc:
            raise EnvironmentUnavailable(
                f"cannot list containers ({detail(exc)}); {start_hint(self.engine.name)}."
            ) from None
        skipped = []
        if not owned_too:
            kept = []
            for row in rows:
                _, name, run, owner, exec_dir = row
                state, pid = owner_state(owner, exec_dir)
                if state == "alive":
                    skipped.append(f"container {name} of run {run}: its process (pid {pid}) still runs")
                elif state == "unknown" and not run_id:
                    skipped.append(f"container {name} of run {run}: whether its process still runs cannot be "
                                   f"told here (no owner label, or another host); --run-id {run} removes it")
                else:
                    kept.append(row)
            rows = kept
        containers = [row[0] for row in rows]
        if containers:
            try:
                self.engine.cli(["rm", "--force", "--volumes", *containers], self.timeout + 0.5 * len(containers))
            except (DockerException, EnvironmentUnavailable):  # one went away meanwhile (or is being removed)
                for container in containers:
                    self.remove_quietly(container)
        for row in rows:
            if row[4]:
                exec_dirs.remove_exec_dir(row[4])
        exec_dirs.prune_exec_dirs(run_id)
        for line in skipped:
            log.info("docker.prune_kept", reason=line)
        return PruneReport(len(containers), tuple(skipped))

    def close(self) -> None:
        """No new creates from now on; creates in flight remove what they make."""
        with self._cond:
            self._closed = True

    def sweep(self, run_id: str, *, wait: float, remove: bool = True) -> int:
        """Teardown, blocking: stop new creates, wait (at most ``wait`` s) for creates and removals in flight,
        then remove every container still labelled with ``run_id``. Returns how many that were."""
        self.close()
        deadline = time.monotonic() + wait
        with self._cond:
            while self._creating or self._removing:
                left = deadline - time.monotonic()
                if left <= 0:
                    _note("warning", "docker.teardown_wait_expired", creating=self._creating, removing=self._removing)
                    break
                self._cond.wait(left)
            ending_deadline = min(deadline, time.monotonic() + ENDING_WAIT)
            while self._ending and (left := ending_deadline - time.monotonic()) > 0:
                self._cond.wait(left)
        if not remove or not run_id:
            return 0
        self.await_retired(max(deadline - time.monotonic(), self.timeout))  # then remove whatever is left
        try:
            left_over = self.prune(run_id, owned_too=True).removed
            if left_over and self.prune(run_id, owned_too=True).removed:  # something failed to go: once more
                _note("warning", "docker.teardown_second_sweep", run_id=run_id)
        except EnvironmentUnavailable as exc:
            _note("warning", "docker.teardown_failed", run_id=run_id, error=str(exc))
            return 0
        if left_over:
            _note("info", "docker.teardown_removed", run_id=run_id, containers=left_over)
        return left_over

    # -- state -----------------------------------------------------------------------------------------

    def gone_reason(self, container: str, *, settle: float = 0.0, autoremove: bool = False) -> str | None:
        """Why ``container`` cannot run commands any more ("was removed", "was stopped or killed (exit code
        137)", ...), or None while it is running. With ``settle``, a running container is looked at again
        for up to that many seconds (the engine may report a kill a moment after the exec ended). A container
        run with ``--rm`` (``autoremove``) that is gone may have been stopped or killed as well (the engine
        removed it then): it "was stopped, killed or removed"."""
        deadline = time.monotonic() + settle
        while True:
            reason = self._gone_reason(container)
            if reason == "was removed" and autoremove:
                reason = "was stopped, killed or removed (the engine removes it once it stops)"
            if reason is not None or time.monotonic() >= deadline:
                return reason
            time.sleep(0.05)

    def _gone_reason(self, container: str) -> str | None:
        try:
            state = self.engine.docker.container.inspect(container).state
        except NoSuchContainer:
            return "was removed"
        except DockerException as exc:
            return f"cannot be inspected (the engine says: {detail(exc)})"
        status = (state.status or "").lower()
        if status in ("removing", "dead"):
            return "was removed"
        if state.oom_killed:
            return f"was killed for running out of memory (status {status}, exit code {state.exit_code})"
        if status == "paused" or state.paused:
            return "was paused"
        if status == "restarting" or state.restarting:
            return "is restarting"
        if status == "running" or state.running:
            return None
        return f"was stopped or killed (status {status or 'unknown'}, exit code {state.exit_code})"
