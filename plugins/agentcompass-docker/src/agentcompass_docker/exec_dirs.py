"""The host directory of one container's exec server: ``<tmp>/acx-XXXXXXXX``, mode 0700, owned by the session's
user (the server runs as it and creates its socket there), bind-mounted into that one container only at
:data:`CONTAINER_DIR`. Paths stay short: a Unix socket path has to fit in 108 bytes.

Each is a directory the run owns (:mod:`agentcompass.runtime.owned_dirs`: ``owner.json`` names the run and the
process that made it), so that ``env prune`` removes what a SIGKILLed run left and never touches a directory
whose owner still runs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from agentcompass.runtime.owned_dirs import make_owned_dir, remove_stale, socket_base

PREFIX = "acx-"
#: Where the directory is mounted inside the container, and the names in it.
CONTAINER_DIR = "/run/agentcompass/exec"
SOCKET_NAME = "exec.sock"
GATEWAY_NAME = "gateway.sock"
NO_SERVER_NAME = "no-server"
#: The static exec server's copy (``native``): the keeper runs it when it is there.
SERVER_NAME = "ac-exec-server"


def base_dir() -> Path:
    """Where exec directories go (short enough for socket paths)."""
    return socket_base()


def make_exec_dir(run_id: str, uid: int, gid: int | None, server: Path | None = None) -> str:
    """A fresh directory for one container, 0700 and owned by ``uid`` (chowned when that is not us), holding
    a copy of the ``server`` binary when given (a copy each: no container can reach another's server)."""
    directory = make_owned_dir(base_dir(), PREFIX, run_id, name_size=0)
    try:
        if server is not None:
            target = directory / SERVER_NAME
            shutil.copyfile(server, target)
            os.chmod(target, 0o755)
        if uid != os.geteuid():
            os.chown(directory, uid, gid if gid is not None else -1)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return str(directory)


def remove_exec_dir(directory: str) -> None:
    """Remove one exec directory (only ever one of ours: named ``acx-*`` under the base)."""
    path = Path(directory)
    if path.name.startswith(PREFIX) and path.parent == base_dir():
        shutil.rmtree(path, ignore_errors=True)


def prune_exec_dirs(run_id: str | None = None) -> int:
    """Remove the exec directories whose owning process is gone (only ``run_id``'s, when given)."""
    return remove_stale(base_dir(), PREFIX, run_id)
