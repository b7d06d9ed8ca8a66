"""Process checks for the local environment's tests: unique ``sleep`` commands that can be found in ``/proc``,
waited for, and (should a test fail) killed by pid so that nothing outlives the test."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path


def unique_sleep(base: int = 300) -> str:
    """A ``sleep`` duration no other process uses: ``sleep 300.482913`` is easy to find and to tell apart."""
    return f"{base}.{random.randrange(10**6):06d}"


def start_time(pid: int) -> int | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(data[data.rindex(b")") + 2 :].split()[19])


def sleeping(duration: str) -> list[int]:
    """Pids of the live ``sleep DURATION`` processes."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", duration.encode()]:
                found.append(int(name))
    return found


def _reap_if_adopted(pid: int) -> None:
    """A test process that used the local environment is a child subreaper: the orphans of a CLI run it
    started (and killed) are re-parented to it, and their zombies are its to reap."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except OSError:
        return
    if fields[0] == b"Z" and int(fields[1]) == os.getpid():
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def exists(pid: int, start: int | None) -> bool:
    """Whether the process (zombies included) is still there, and not a newer one with its pid."""
    _reap_if_adopted(pid)
    now = start_time(pid)
    return now is not None and (start is None or now == start)


def wait_until_gone(pids: dict[int, int | None], timeout: float = 15) -> list[int]:
    """Poll until none of ``pids`` (pid → start time) is left; returns the ones that are."""
    deadline = time.monotonic() + timeout
    while True:
        left = [pid for pid, start in pids.items() if exists(pid, start)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def wait_for_sleeping(duration: str, n: int, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sleeping(duration)
        if len(found) >= n:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never saw {n} 'sleep {duration}' processes (saw {len(sleeping(duration))})")


def kill_sleeping(duration: str) -> None:
    """Kill, by pid, whatever ``sleep DURATION`` a failed test left."""
    for pid in sleeping(duration):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
