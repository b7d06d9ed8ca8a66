"""Where a run's control socket is, who owns the run (its lock), and who may talk to it (peer credentials)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import struct
import tempfile
from pathlib import Path
from typing import Any

import attrs

from agentcompass.errors import UsageError

SOCKET = "control.sock"
LOCK = "control.lock"
#: Bytes a unix socket address may hold (108 on Linux, with its terminating NUL), less a margin.
MAX_SOCKET_PATH = 100


def socket_link(run_dir: Path) -> Path:
    """The path clients use: ``RUN_DIR/control.sock`` (the socket, or a link to it)."""
    return run_dir / SOCKET


def socket_address(run_dir: Path) -> Path:
    """Where the socket itself is bound: ``RUN_DIR/control.sock`` when that path fits a socket address, else a
    socket in a private (0700) directory under the temporary directory, named after the run directory."""
    direct = socket_link(run_dir)
    if len(os.fsencode(direct)) <= MAX_SOCKET_PATH:
        return direct
    private = Path(tempfile.gettempdir()) / f"agentcompass-ctl-{os.getuid()}"
    private.mkdir(mode=0o700, exist_ok=True)
    digest = hashlib.sha256(os.fsencode(run_dir.resolve())).hexdigest()[:20]
    return private / f"{digest}.sock"


def connect_address(run_dir: Path) -> Path:
    """What a client connects to: the link's target, when ``control.sock`` is a link."""
    link = socket_link(run_dir)
    return Path(os.readlink(link)) if link.is_symlink() else link


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected unix socket (``SO_PEERCRED``)."""
    data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", data)
    return int(uid)


def peer_allowed(peer: int, owner: int) -> bool:
    """Only the run's own user may steer it (root included only when root runs it)."""
    return peer == owner


@attrs.define
class RunLock:
    """The run's lock: an exclusive ``flock`` on ``RUN_DIR/control.lock`` holding the owner's pid and uid."""

    path: Path
    _fd: int | None = None

    @classmethod
    def of(cls, run_dir: Path) -> RunLock:
        return cls(run_dir / LOCK)

    def acquire(self) -> None:
        """Take the lock, or raise :class:`UsageError` naming the live process that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # a pid and a uid: no secret
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self.holder().get("pid", "?")
            raise UsageError(f"{self.path.parent} is being run by process {holder}; steer it with agentcompass "
                             f"ctl {self.path.parent} status, or wait for it to end") from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "uid": os.getuid()}).encode())
        self._fd = fd

    def held_by_someone(self) -> bool:
        """Whether a live process holds the lock (this one included)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops a shared lock this call took
        return False

    def holder(self) -> dict[str, Any]:
        """Who holds (or last held) the lock: ``{"pid": ..., "uid": ...}``, empty when unknown."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def release(self) -> None:
        """Remove the lock file and drop the lock (the file first: nothing waits on it)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
