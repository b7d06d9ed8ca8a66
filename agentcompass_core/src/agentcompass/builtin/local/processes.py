"""Finding and killing every process a local command started, however it tried to get away.

A command runs in a session and process group of its own, which catches ordinary background children. Three
more nets catch the rest (``setsid``, double forks, orphans):

* a **cgroup v2** per command, where this process's cgroup is writable (``processes=cgroup``; ``auto`` picks it
  when it works): every descendant is born into it, and ``cgroup.kill`` ends them all;
* **process-tree walking** of ``/proc`` (always): the command's descendants by parent chains, processes of its
  session, and processes carrying the command's marker variable (:data:`MARKER`, inherited by descendants).
  The runtime makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so orphans of a command
  are re-parented to the runtime rather than to init, and their parent chain still leads to us;
* killing is repeated (collect, SIGKILL, collect again) until nothing is left or a deadline passes.

Zombies the runtime adopted are reaped when they belong to a command (by cgroup, session id or a recorded
identity). Orphans of *other* code in the runtime that reach it because it is a subreaper are not reaped: a
process cannot tell adopted children from the direct children some other code is about to wait for.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agentcompass.builtin.local.cgroups import (
    cgroup_of,
    cgroup_populated,
    kill_cgroup,
    own_cgroup_dir,
    remove_cgroup,
    runtime_cgroup_name,
)
from agentcompass.procfs import (
    MARKER,
    ProcInfo,
    alive,
    become_subreaper,
    kill,
    marker_of,
    read_stat,
    scan,
)
from agentcompass.runtime.logs import get_logger

__all__ = [
    "MARKER", "ProcInfo", "ProcessTree", "alive", "become_subreaper", "cgroup_of", "cgroup_populated", "collect",
    "kill", "kill_cgroup", "kill_marked", "kill_now", "marker_of", "own_cgroup_dir", "read_stat", "reap",
    "reap_adopted", "remove_cgroup", "runtime_cgroup_name", "scan", "terminate_sync",
]

log = get_logger(plugin="local")


@dataclass
class ProcessTree:
    """One command and everything it started: what the runtime knows of it."""

    marker: str
    #: The command's cgroup directory and its path inside the hierarchy (as ``/proc/PID/cgroup`` shows it).
    cgroup: Path | None = None
    cgroup_path: str | None = None
    root: subprocess.Popen[bytes] | None = None
    known: set[tuple[int, int]] = field(default_factory=set)
    #: Session ids of the tree, each with the start time of the process that led it.
    sids: dict[int, int] = field(default_factory=dict)

    def preexec(self) -> Callable[[], None] | None:
        """What the child runs between fork and exec: it moves itself into the command's cgroup, so that
        nothing it starts can be born outside (moving it from here after the start would race its forks)."""
        if self.cgroup is None:
            return None
        procs = str(self.cgroup / "cgroup.procs")

        def enter() -> None:  # in the forked child: no allocation-heavy work, no exceptions
            try:
                fd = os.open(procs, os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)
            except OSError:
                pass

        return enter

    def started(self, proc: subprocess.Popen[bytes]) -> None:
        """Record the command's process. Call it right after the process exists, before any ``await``."""
        self.root = proc
        if self.cgroup is not None and not self.in_cgroup(cgroup_of(proc.pid)) and proc.poll() is None:
            log.warning("local.cgroup_move_failed", cgroup=str(self.cgroup))
            self.cgroup = self.cgroup_path = None
        info = read_stat(proc.pid)
        if info is not None:
            self.known.add((info.pid, info.start))
            self.sids[proc.pid] = info.start  # it leads a session of its own

    @property
    def running(self) -> bool:
        return self.root is not None and self.root.poll() is None

    def in_cgroup(self, path: str | None) -> bool:
        own = self.cgroup_path
        return own is not None and path is not None and (path == own or path.startswith(own + "/"))


def _cgroup_pids(directory: Path) -> set[int]:
    pids: set[int] = set()
    with contextlib.suppress(OSError):
        for procs in directory.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                pids.update(int(x) for x in procs.read_text().split())
    return pids


def collect(trees: Iterable[ProcessTree], matches: Callable[[str], bool]) -> tuple[list[ProcInfo], list[ProcInfo]]:
    """The live processes and the zombies that belong to ``trees``. ``matches`` says whether a marker value
    (see :data:`MARKER`) belongs to them. Live members are recorded in their trees, so that their zombies are
    recognised later."""
    trees = list(trees)
    me = os.getpid()
    table = scan()
    # A session id stays reserved while any process is in the session; once the number names a process
    # other than the session's leader, it was freed and reused.
    sids = {sid for t in trees for sid, start in t.sids.items() if sid not in table or table[sid].start == start}
    known = {k for t in trees for k in t.known}
    roots = {t.root.pid for t in trees if t.root is not None and t.root.returncode is None}
    in_cgroups = {pid for t in trees if t.cgroup is not None for pid in _cgroup_pids(t.cgroup)}
    with_cgroup = [t for t in trees if t.cgroup_path is not None]
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    members: dict[int, ProcInfo] = {}
    for pid, info in table.items():
        if pid == me or pid <= 2 or info.ppid == 2:  # this process, init, kernel threads
            continue
        belongs = (pid in roots or pid in in_cgroups or (pid, info.start) in known or info.sid in sids
                   or info.pgid in sids)
        if not belongs and info.zombie:
            # A zombie has no environment left; its cgroup it keeps.
            if info.ppid == me and with_cgroup:
                path = cgroup_of(pid)
                belongs = any(t.in_cgroup(path) for t in with_cgroup)
        elif not belongs:
            value = marker_of(pid)
            belongs = value is not None and matches(value)
        if belongs:
            members[pid] = info
    pending = list(members)
    while pending:  # every descendant of a member is a member
        for child in children.get(pending.pop(), ()):
            if child not in members and child != me:
                members[child] = table[child]
                pending.append(child)
    live = [i for i in members.values() if not i.zombie]
    zombies = [i for i in members.values() if i.zombie]
    seen = {(i.pid, i.start) for i in live}
    leaders = {i.pid: i.start for i in live if i.sid == i.pid}
    for tree in trees:  # new objects, not updates: another thread may be iterating the old ones
        tree.known = tree.known | seen
        tree.sids = {**leaders, **tree.sids}
    return live, zombies


def _children_of_self() -> list[int] | None:
    """This process's children (adopted ones included), without a scan of ``/proc``."""
    pids: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(FileNotFoundError):  # a thread that just ended
                pids.extend(int(x) for x in Path(f"/proc/self/task/{tid}/children").read_text().split())
    except OSError:
        return None
    return pids


def reap_adopted(trees: Iterable[ProcessTree]) -> None:
    """Reap the zombies among this process's children that belong to ``trees`` (their commands' background
    processes that ended after their parent): cheap enough to run after every command."""
    trees = list(trees)
    children = _children_of_self()
    if not children:
        return
    roots = {t.root.pid for t in trees if t.root is not None}
    for tree in trees:
        if tree.root is not None and tree.root.returncode is None:
            tree.root.poll()
    sids = {sid: start for t in trees for sid, start in t.sids.items()}
    known = {k for t in trees for k in t.known}
    with_cgroup = [t for t in trees if t.cgroup_path is not None]
    for pid in children:
        if pid in roots:
            continue  # their Popen reaps them
        info = read_stat(pid)
        if info is None or not info.zombie:
            continue
        belongs = (pid, info.start) in known
        if not belongs and info.sid in sids:
            leader = read_stat(info.sid)  # the session id was not freed and reused
            belongs = leader is None or leader.start == sids[info.sid]
        if not belongs and with_cgroup:
            path = cgroup_of(pid)
            belongs = any(t.in_cgroup(path) for t in with_cgroup)
        if belongs:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def kill_now(trees: Iterable[ProcessTree], matches: Callable[[str], bool], *, walk: bool = True) -> int:
    """One pass of killing: process groups, cgroups, then (``walk``) every member found in ``/proc``.
    Returns how many processes were still running. Quick and synchronous: safe on a cancellation path."""
    trees = list(trees)
    if not trees:  # no command ever ran: nothing can be left (and no /proc walk on the per-task path)
        return 0
    for tree in trees:
        if tree.running and tree.root is not None:  # not reaped yet, so its pid (and group id) is still ours
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(tree.root.pid, signal.SIGKILL)
        if tree.cgroup is not None:
            kill_cgroup(tree.cgroup)
    if not walk:
        return 0
    live, _ = collect(trees, matches)
    for info in live:
        kill(info)
    return len(live)


def reap(trees: Iterable[ProcessTree], matches: Callable[[str], bool]) -> int:
    """Reap the trees' exited processes the runtime is the parent of; returns how many are left running or
    unreaped."""
    trees = list(trees)
    me = os.getpid()
    roots = {t.root.pid: t.root for t in trees if t.root is not None}
    for proc in roots.values():
        proc.poll()
    live, zombies = collect(trees, matches)
    left = len(live)
    for info in zombies:
        if info.pid in roots:
            continue  # reaped by poll() above once it can be
        if info.ppid == me:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(info.pid, os.WNOHANG)
    left += sum(1 for p in roots.values() if p.returncode is None)
    return left


def kill_marked(matches: Callable[[str], bool], timeout: float) -> int:
    """Kill every process whose marker ``matches``, and their descendants (what a dead runtime left)."""
    return terminate_sync([], matches, timeout)


def terminate_sync(trees: Iterable[ProcessTree], matches: Callable[[str], bool], timeout: float) -> int:
    """Kill and reap until nothing of ``trees`` is left or ``timeout`` seconds passed; returns what is left.
    Blocking: run it in a thread."""
    trees = list(trees)
    if not trees:
        return 0
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        kill_now(trees, matches)
        left = reap(trees, matches)
        populated = [t.cgroup for t in trees if t.cgroup is not None and cgroup_populated(t.cgroup)]
        if not left and not populated:
            return 0
        if time.monotonic() >= deadline:
            return left + len(populated)
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
