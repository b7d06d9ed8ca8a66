"""The exec server as a static binary: ``_exec_server.c`` (kept beside ``_exec_server.py``), compiled on this
host with ``gcc -static`` when the provider sets up (image-preparation time), once per source and compiler.

Every container of a run then starts it (a copy in its exec directory, :mod:`~agentcompass_docker.exec_dirs`) instead of
``python3 -I -S -c SOURCE``: well under a millisecond of CPU instead of tens, which is most of what a container
costs beyond a plain ``docker run``. The Python server stays the fallback, both when no binary can be built
here (no ``gcc`` or no static libc: the warning event ``docker.exec_server_python`` says why, once) and in a
container where the binary cannot run (the keeper, ``_scripts.SERVER_KEEPER``, then starts ``python3``).

The binary is cached under ``$XDG_CACHE_HOME/agentcompass/`` (else ``~/.cache/agentcompass/``), named by a hash of
the source, the compiler's version and the flags: a changed source is a new file, never a stale binary.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("_exec_server.c")
FLAGS = ("-O2", "-static", "-s", "-pthread")
#: Seconds a build may take.
BUILD_TIMEOUT = 120.0


class BuildFailed(Exception):
    """The binary cannot be built on this host; the message says why."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentcompass"


def build(compiler: str = "gcc") -> Path:
    """The static exec server for this host (built now unless cached). Raises :class:`BuildFailed`."""
    if platform.system() != "Linux":
        raise BuildFailed(f"the binary exec server is for Linux hosts (this is {platform.system()})")
    gcc = shutil.which(compiler)
    if gcc is None:
        raise BuildFailed(f"no {compiler} on PATH")
    source = SOURCE.read_bytes()
    try:
        version = subprocess.run([gcc, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True,
                                 timeout=BUILD_TIMEOUT, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildFailed(f"{gcc} does not run: {exc}") from None
    key = hashlib.sha256(b"\0".join([source, version.encode(), platform.machine().encode(), *map(str.encode, FLAGS)]))
    target = cache_dir() / f"exec-server-{key.hexdigest()[:16]}"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=".exec-server-", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([gcc, *FLAGS, "-o", partial, str(SOURCE)], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise BuildFailed(f"{gcc} -static failed: {last}")
        os.chmod(partial, 0o755)
        os.replace(partial, target)  # atomic: a concurrent build of the same key writes the same bytes
    except subprocess.TimeoutExpired:
        raise BuildFailed(f"{gcc} took longer than {BUILD_TIMEOUT:.0f} s") from None
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target
