"""Directories a run owns on the host (the local environment's run roots, the gateway's socket directory).

Each holds ``owner.json``: the run id and the pid and start time of the process that made it. A directory whose
owner is gone (a SIGKILLed run) is *stale*: ``agentcompass env prune`` and a resume of that run remove it. A
directory whose owner still runs, or one without ``owner.json``, is never touched.

Public API: a plugin that leaves directories on the host (the docker plugin's exec-server socket directories)
makes them with :func:`make_owned_dir` and prunes them with :func:`remove_stale`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentcompass.procfs import alive, read_stat
from agentcompass.runtime.names import safe_name

OWNER_FILE = "owner.json"


def socket_base() -> Path:
    """Where directories holding Unix sockets go: the temp directory, unless a socket path in it would pass the
    kernel's limit (about 107 bytes)."""
    base = Path(tempfile.gettempdir())
    return base if len(str(base)) <= 60 else Path("/tmp")


def identity(pid: int) -> dict[str, Any]:
    """What identifies a process across pid reuse: its pid and start time (``None`` without ``/proc``)."""
    info = read_stat(pid)
    return {"pid": pid, "start": info.start if info is not None else None}


def owner_alive(owner: Mapping[str, Any]) -> bool:
    """Whether the process an ``owner.json`` names still runs (the same process: its start time is checked)."""
    pid, start = owner.get("pid"), owner.get("start")
    if not isinstance(pid, int):
        return False
    if isinstance(start, int):
        return alive(pid, start)
    try:  # no /proc: the pid alone
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_owner(directory: Path) -> dict[str, Any] | None:
    """The ``owner.json`` of ``directory``, or None when it has none (not ours, or not finished being made)."""
    try:
        data = json.loads((directory / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def make_owned_dir(base: Path, prefix: str, run_id: str, *, name_size: int = 40) -> Path:
    """A fresh ``<prefix><run id>-XXXX`` directory under ``base`` (resolved), owned by this process; the run id
    is cut to ``name_size`` characters in the name (0: left out; ``owner.json`` always holds it)."""
    base.mkdir(parents=True, exist_ok=True)
    tag = f"{safe_name(run_id, name_size)}-" if name_size else ""
    directory = Path(os.path.realpath(tempfile.mkdtemp(prefix=f"{prefix}{tag}", dir=base)))
    owner = {"run_id": run_id, **identity(os.getpid()), "created_at": time.time()}
    (directory / OWNER_FILE).write_text(json.dumps(owner))
    return directory


def stale_dirs(base: Path, prefix: str, run_id: str | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """The ``prefix`` directories under ``base`` whose owner is gone (only ``run_id``'s, when given)."""
    try:
        entries = sorted(p for p in base.iterdir() if p.name.startswith(prefix) and p.is_dir())
    except OSError:
        return []
    found = []
    for entry in entries:
        owner = read_owner(entry)
        if owner is None or (run_id is not None and owner.get("run_id") != run_id) or owner_alive(owner):
            continue
        found.append((entry, owner))
    return found


def remove_stale(base: Path, prefix: str, run_id: str | None = None) -> int:
    """Remove the stale ``prefix`` directories under ``base``; how many went."""
    removed = 0
    for entry, _ in stale_dirs(base, prefix, run_id):
        shutil.rmtree(entry, ignore_errors=True)
        removed += not entry.exists()
    return removed
