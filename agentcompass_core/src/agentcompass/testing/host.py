"""What the checks need of an environment on this host: its working directory, when it is on this machine's
file system, and a snapshot of a directory's files."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
from pathlib import Path

from agentcompass.runtime.environment import EnvironmentSession


async def host_workdir(env: EnvironmentSession) -> Path | None:
    """The session's working directory as a host path, when the session writes straight to the host's file
    system (``local``); ``None`` otherwise (a container)."""
    workdir = Path(env.workdir)
    if not workdir.is_absolute() or not await asyncio.to_thread(workdir.is_dir):
        return None
    probe = f".agentcompass-probe-{secrets.token_hex(6)}"
    token = secrets.token_hex(8)
    try:
        await env.write_text(probe, token)
    except Exception:
        return None
    path = workdir / probe
    try:
        if path.read_text() == token:
            return workdir
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
    with contextlib.suppress(Exception):
        await env.exec(["rm", "-f", probe], timeout=30)
    return None


def snapshot(root: Path, limit: int = 20_000) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, path in enumerate(sorted(root.rglob("*"))):
        if i >= limit:
            break
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
