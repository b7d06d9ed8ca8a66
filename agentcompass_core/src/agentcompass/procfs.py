"""Reading ``/proc``: processes, their identity (pid and start time), their marker variable; killing one
process exactly; making this process a child subreaper."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from agentcompass.errors import describe
from agentcompass.runtime.logs import get_logger

#: The variable every command's environment carries: ``<session>.<command>:<session working directory>``.
MARKER = "AGENTCOMPASS_LOCAL_SESSION"
PR_SET_CHILD_SUBREAPER = 36

log = get_logger(plugin="local")


@dataclass(frozen=True)
class ProcInfo:
    """One line of ``/proc/PID/stat``."""

    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start: int  # clock ticks after boot: with ``pid``, the process's identity

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def read_stat(pid: int) -> ProcInfo | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    try:
        rest = data[data.rindex(b")") + 2 :].split()  # the command name may hold spaces and parentheses
        return ProcInfo(pid, rest[0].decode(), int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]))
    except (ValueError, IndexError):
        return None


def scan() -> dict[int, ProcInfo]:
    """Every process visible in ``/proc``."""
    table: dict[int, ProcInfo] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit() and (info := read_stat(int(name))) is not None:
                table[info.pid] = info
    return table


def alive(pid: int, start: int) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (a zombie does not)."""
    info = read_stat(pid)
    return info is not None and info.start == start and not info.zombie


def marker_of(pid: int) -> str | None:
    """The :data:`MARKER` value in the environment ``pid`` was started with, if it can be read."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = MARKER.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("utf-8", "replace")
    return None


def kill(info: ProcInfo) -> None:
    """SIGKILL the process ``info`` names, and not another one that reused its pid."""
    try:
        fd = os.pidfd_open(info.pid)
    except (AttributeError, OSError):
        fd = None
    try:
        current = read_stat(info.pid)
        if current is None or current.start != info.start:
            return
        if fd is not None:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        else:
            os.kill(info.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    finally:
        if fd is not None:
            os.close(fd)


_subreaper: dict[int, bool] = {}


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux); True when it is one."""
    pid = os.getpid()
    if pid not in _subreaper:
        ok = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                ok = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
                if not ok:
                    log.warning("local.subreaper_unavailable", error=os.strerror(ctypes.get_errno()))
            except (OSError, AttributeError) as exc:
                log.warning("local.subreaper_unavailable", error=describe(exc))
        _subreaper[pid] = ok
    return _subreaper[pid]
