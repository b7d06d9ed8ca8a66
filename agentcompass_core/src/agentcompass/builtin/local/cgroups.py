"""cgroup v2: this process's cgroup, and killing and removing the cgroups of commands."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def cgroup_of(pid: int) -> str | None:
    """The cgroup v2 path of ``pid`` (zombies keep theirs)."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def own_cgroup_dir() -> tuple[Path, str] | None:
    """This process's cgroup v2 directory and its path in the hierarchy, when cgroup v2 is mounted (at
    ``/sys/fs/cgroup``, or ``/sys/fs/cgroup/unified`` on hybrid hosts) and the directory is writable."""
    own = cgroup_of(os.getpid())
    if own is None:
        return None
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            mount = fields[1].replace("\\040", " ")
            directory = Path(mount) / own.lstrip("/")
            if (directory / "cgroup.procs").exists() and os.access(directory, os.W_OK):
                return directory, own.rstrip("/")
    return None


def runtime_cgroup_name(pid: int, start: int) -> str:
    return f"agentcompass-{pid}-{start}"


def kill_cgroup(directory: Path) -> None:
    """SIGKILL every process in the cgroup ``directory`` and its descendants."""
    try:
        (directory / "cgroup.kill").write_text("1")
        return
    except FileNotFoundError:
        if not directory.exists():
            return
    except OSError:
        pass
    for procs in directory.rglob("cgroup.procs"):  # kernels before 5.14 have no cgroup.kill
        with contextlib.suppress(OSError):
            for line in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(line), signal.SIGKILL)


def cgroup_populated(directory: Path) -> bool:
    try:
        return "populated 1" in (directory / "cgroup.events").read_text()
    except OSError:
        return False


def remove_cgroup(directory: Path) -> bool:
    """Remove ``directory`` and its child cgroups (they must be empty); True when it is gone."""
    if not directory.exists():
        return True
    for child in sorted((p for p in directory.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            child.rmdir()
    try:
        directory.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
