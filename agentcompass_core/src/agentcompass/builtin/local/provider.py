"""The ``local`` provider: a run root of working directories, one per task attempt, and their clean-up.

A run's working directories live under a *run root* ``agentcompass-local-<run id>-XXXX`` (in ``root=`` or the
system's temp directory) that holds ``owner.json``: the run id and the pid and start time of the process that
owns it. ``prune`` (``agentcompass env prune --env local``) removes the run roots whose owner is gone (a
SIGKILLed run, or ``keep=true``), after killing any process their commands left; a new run with the same run id
(a resume) does the same for that run in ``setup``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from agentcompass.builtin.local import processes
from agentcompass.builtin.local.options import LocalOptions
from agentcompass.builtin.local.session import KILL_TIMEOUT, LocalSession
from agentcompass.errors import EnvironmentUnavailable, InfrastructureError, describe
from agentcompass.runtime.environment import EnvironmentProvider, EnvironmentSession
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.names import safe_name
from agentcompass.runtime.owned_dirs import identity, make_owned_dir, stale_dirs
from agentcompass.runtime.types import EnvironmentSpec

#: Host variables a child process inherits; everything else it gets is explicit.
INHERITED_VARIABLES = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT")
ROOT_PREFIX = "agentcompass-local-"

T = TypeVar("T")
log = get_logger(plugin="local")
_session_numbers = itertools.count(1)
_homes: set[Path] = set()


def make_run_root(base: Path, run_id: str) -> Path:
    """A fresh run root under ``base``, as a resolved path (sessions rely on it), with its ``owner.json``."""
    return make_owned_dir(base, ROOT_PREFIX, run_id)


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a worker thread, or right here once the loop's executor is shut down (a close that
    outlived ``asyncio.run``'s clean-up must still finish, and must not raise)."""
    try:
        return await asyncio.to_thread(fn, *args)
    except RuntimeError as exc:
        if "shutdown" not in str(exc):
            raise
        return fn(*args)


def _under(prefix: str) -> Callable[[str], bool]:
    """Whether a marker value names a working directory under ``prefix``."""

    def matches(value: str) -> bool:
        return value.partition(":")[2].startswith(prefix)

    return matches


class LocalProvider(EnvironmentProvider):
    """Opens :class:`LocalSession`\\ s under a run root.

    Options (``--env-arg``, see :class:`LocalOptions`): ``root=DIR`` (default: the temp directory),
    ``keep=true|false`` (keep working directories; ``env prune`` removes them once the run is over),
    ``processes=auto|cgroup|tree`` (how every process of a command is found to be killed).
    """

    name = "local"

    def __init__(self, **options: Any) -> None:
        self.options = LocalOptions.parse(options)
        self.root = Path(self.options.root) if self.options.root else None
        self.keep = self.options.keep
        self._run_root: Path | None = None
        self._cgroup_home: tuple[Path, str] | None = None
        self._remover = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentcompass-rm")
        # Plain futures of the remover thread: no event-loop callbacks, so nothing runs on a closed loop.
        self._removals: set[concurrent.futures.Future[None]] = set()
        self._live: set[LocalSession] = set()

    @property
    def base(self) -> Path:
        return self.root or Path(tempfile.gettempdir())

    # -- run ---------------------------------------------------------------------------------------------

    async def setup(self, specs: Iterable[EnvironmentSpec], *, run_id: str) -> None:
        await asyncio.to_thread(self._setup, run_id)

    def _setup(self, run_id: str) -> None:
        if self._run_root is not None:
            return
        self._prune(run_id)  # a resume starts clean of what the interrupted run left
        if self.options.processes != "tree":
            self._cgroup_home = self._make_cgroup_home()
            if self._cgroup_home is None and self.options.processes == "cgroup":
                raise EnvironmentUnavailable("local environment processes=cgroup: no writable cgroup v2 here; "
                                             "use processes=tree or auto")
        processes.become_subreaper()
        try:
            self._run_root = make_run_root(self.base, run_id)
        except OSError as exc:
            raise EnvironmentUnavailable(
                f"cannot create the local run root under {self.base}: {describe(exc)}"
            ) from exc

    @staticmethod
    def _make_cgroup_home() -> tuple[Path, str] | None:
        own = processes.own_cgroup_dir()
        if own is None:
            return None
        name = processes.runtime_cgroup_name(os.getpid(), identity(os.getpid())["start"] or 0)
        home = own[0] / name
        try:
            home.mkdir(exist_ok=True)
        except OSError as exc:
            log.info("local.cgroup_unavailable", error=describe(exc))
            return None
        if home not in _homes:
            _homes.add(home)
            atexit.register(processes.remove_cgroup, home)  # once empty; ``prune`` takes what a crash left
        return home, f"{own[1]}/{name}"

    async def open(
        self, spec: EnvironmentSpec, *, run_id: str, task_id: str, base_env: Mapping[str, str]
    ) -> LocalSession:
        if self._run_root is None:
            await self.setup((), run_id=run_id)
        assert self._run_root is not None
        try:
            root = Path(tempfile.mkdtemp(prefix=f"{safe_name(task_id, 60, distinct=False)}-", dir=self._run_root))
        except OSError as exc:
            raise InfrastructureError(f"cannot create a working directory: {describe(exc)}") from exc
        cgroup = None
        if self._cgroup_home is not None:  # made by the session's first command (most sessions of a run have some)
            name = f"s{next(_session_numbers)}"
            cgroup = (self._cgroup_home[0] / name, f"{self._cgroup_home[1]}/{name}")
        env = {k: os.environ[k] for k in INHERITED_VARIABLES if k in os.environ}
        env.setdefault("PATH", os.defpath)
        env.update(HOME=str(root), TMPDIR=str(root), PYTHONDONTWRITEBYTECODE="1")
        env.update(base_env)
        env.update(spec.env)
        session = LocalSession(root, env, resolved=True, cgroup=cgroup)  # mkdtemp'd under the resolved run root
        self._live.add(session)
        return session

    async def close(self, session: EnvironmentSession) -> None:
        if not isinstance(session, LocalSession):
            return
        session.kill_all()  # at once, so that even a close cut short has killed everything it could see
        if session.ran_commands:
            await _in_thread(session.terminate, KILL_TIMEOUT)
        else:
            session.terminate(KILL_TIMEOUT)  # nothing to kill or wait for: no thread hop on the per-task path
        self._live.discard(session)
        if not self.keep:
            self._remove(session.root)

    def _remove(self, path: Path) -> None:
        """Remove ``path`` on the remover thread, not awaited: closing stays cheap however large the directory,
        and teardown waits for every removal. After teardown (a close that outlived the run) it is removed
        here and now."""
        try:
            removal = self._remover.submit(shutil.rmtree, path, True)
        except RuntimeError:  # the remover is shut down
            shutil.rmtree(path, True)
            return
        self._removals.add(removal)
        removal.add_done_callback(self._removals.discard)

    async def teardown(self) -> None:
        for session in list(self._live):  # never closed (or still closing): nothing of it outlives the run
            session.kill_all()
            await _in_thread(session.terminate, KILL_TIMEOUT)
            self._live.discard(session)
        pending = list(self._removals)
        if pending:
            await _in_thread(concurrent.futures.wait, pending)
        if self._run_root is not None and not self.keep:
            await _in_thread(shutil.rmtree, self._run_root, True)
        if self._cgroup_home is not None:
            processes.remove_cgroup(self._cgroup_home[0])  # fails, harmlessly, while other runs here use it
        self._remover.shutdown(wait=False)

    # -- prune -------------------------------------------------------------------------------------------

    async def prune(self, run_id: str | None = None) -> int:
        """Remove the run roots (and their left-over processes and cgroups) of runs whose process is gone:
        only ``run_id``'s, or every run's. A run that is still alive is never touched. Returns how many run
        roots were removed."""
        return await asyncio.to_thread(self._prune, run_id)

    def _prune(self, run_id: str | None) -> int:
        removed = 0
        dead: set[tuple[int, int | None]] = set()
        for entry, owner in stale_dirs(self.base, ROOT_PREFIX, run_id):
            dead.add((owner.get("pid"), owner.get("start")))  # type: ignore[arg-type]
            processes.kill_marked(_under(os.path.realpath(entry) + os.sep), KILL_TIMEOUT)
            shutil.rmtree(entry, ignore_errors=True)
            if entry.exists():
                log.warning("local.prune_incomplete", path=str(entry))
            else:
                removed += 1
                log.info("local.pruned", path=str(entry), run_id=owner.get("run_id"))
        self._prune_cgroups(dead, everything=run_id is None)
        return removed

    @staticmethod
    def _prune_cgroups(dead: set[tuple[int, int | None]], *, everything: bool) -> None:
        """Kill and remove the cgroups of runtimes that are gone (those in ``dead``, or all with
        ``everything``)."""
        own = processes.own_cgroup_dir()
        if own is None:
            return
        with contextlib.suppress(OSError):
            for directory in own[0].glob("agentcompass-*-*"):
                _, pid_text, start_text = directory.name.rsplit("-", 2)
                if not (pid_text.isdigit() and start_text.isdigit()):
                    continue
                pid, start = int(pid_text), int(start_text)
                if processes.alive(pid, start) or not (everything or (pid, start) in dead):
                    continue
                processes.kill_cgroup(directory)
                deadline = time.monotonic() + KILL_TIMEOUT
                while processes.cgroup_populated(directory) and time.monotonic() < deadline:
                    time.sleep(0.01)
                processes.remove_cgroup(directory)
