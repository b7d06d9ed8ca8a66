"""The host directory of one container's exec server: ``<tmp>/acx-XXXXXXXX``, mode 0700, owned by the session's
user (the server runs as it and creates its socket there), bind-mounted into that one container only at
:data:`CONTAINER_DIR`. Paths stay short: a Unix socket path has to fit in 108 bytes.

Each holds ``owner``: ``<pid> <run id>`` of the process that made it, so that ``env prune`` removes what a
SIGKILLed run left (a directory whose owner still runs is never touched).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "acx-"
OWNER_FILE = "owner"
#: Where the directory is mounted inside the container, and the names in it.
CONTAINER_DIR = "/run/agentcompass/exec"
SOCKET_NAME = "exec.sock"
GATEWAY_NAME = "gateway.sock"
NO_SERVER_NAME = "no-server"


def base_dir() -> Path:
    """The temp directory, unless a socket path in it would pass the kernel's limit."""
    base = Path(tempfile.gettempdir())
    return base if len(str(base)) <= 60 else Path("/tmp")


def make_exec_dir(run_id: str, uid: int, gid: int | None) -> str:
    """A fresh directory for one container, 0700 and owned by ``uid`` (chowned when that is not us)."""
    directory = tempfile.mkdtemp(prefix=PREFIX, dir=base_dir())
    try:
        Path(directory, OWNER_FILE).write_text(f"{os.getpid()} {run_id}\n")
        if uid != os.geteuid():
            os.chown(directory, uid, gid if gid is not None else -1)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return directory


def remove_exec_dir(directory: str) -> None:
    """Remove one exec directory (only ever one of ours: named ``acx-*`` under the base)."""
    path = Path(directory)
    if path.name.startswith(PREFIX) and path.parent == base_dir():
        shutil.rmtree(path, ignore_errors=True)


def _owner(directory: Path) -> tuple[int, str] | None:
    try:
        pid, _, run_id = (directory / OWNER_FILE).read_text().strip().partition(" ")
        return int(pid), run_id
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    # The core's owned_dirs has the same check; plugins import only the public surface, so it is repeated here.
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune_exec_dirs(run_id: str | None = None) -> int:
    """Remove the exec directories whose owning process is gone (only ``run_id``'s, when given)."""
    removed = 0
    with contextlib.suppress(OSError):
        for entry in sorted(base_dir().glob(f"{PREFIX}*")):
            owner = _owner(entry)
            if owner is None or (run_id and owner[1] != run_id) or _alive(owner[0]):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed += not entry.exists()
    return removed
