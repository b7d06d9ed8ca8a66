"""Paths confined to a working directory, and copies out of it that cannot be led outside by a symlink."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from agentcompass.errors import UsageError
from agentcompass.runtime.logs import get_logger

log = get_logger(plugin="local")


class PathEscapeError(UsageError, ValueError):
    """A path given to an environment, or a symlink inside it, leads outside its working directory."""


def confine(root: Path, path: Path, shown: str) -> Path:
    """``path`` resolved (symlinks followed), which must be ``root`` (a resolved path) or inside it."""
    candidate = path.resolve()
    if candidate != root and not candidate.is_relative_to(root):
        raise PathEscapeError(f"path {shown!r} leads outside the task's working directory")
    return candidate


def _relative(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _plan(root: Path, shown: Path, real: Path, target: Path, ancestors: frozenset[Path],
          out: list[tuple[Path, Path, bool]]) -> None:
    """Collect ``(source, target, is_dir)`` for the tree at ``real`` (``shown`` is its path as seen through
    links), refusing links that lead out of ``root`` or into a loop."""
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        return  # a dangling link inside the working directory: nothing to copy
    if stat.S_ISDIR(mode):
        if real in ancestors:
            raise PathEscapeError(f"{_relative(root, shown)!r} is a symlink into a loop (to {real})")
        out.append((real, target, True))
        with os.scandir(real) as entries:
            names = sorted((e.name, e.is_symlink()) for e in entries)
        for name, is_link in names:
            child = real / name
            if is_link:
                resolved = Path(os.path.realpath(child))
                if resolved != root and not resolved.is_relative_to(root):
                    raise PathEscapeError(
                        f"{_relative(root, shown / name)!r} is a symlink to {os.readlink(child)!r}, outside the "
                        "task's working directory"
                    )
                child = resolved
            _plan(root, shown / name, child, target / name, ancestors | {real}, out)
    elif stat.S_ISREG(mode):
        out.append((real, target, False))
    else:  # a FIFO would block the copy forever; sockets and devices have no content to keep
        log.debug("local.download_skipped", path=_relative(root, shown))


def copy_out(root: Path, source: Path, target: Path) -> None:
    """Copy ``source`` (resolved, inside ``root``) to the host path ``target``.

    Symlinks are resolved: a link that points inside ``root`` is copied as its target's content; a link that
    points outside (or into a directory loop) raises :class:`PathEscapeError` before anything is copied.
    Special files (FIFOs, sockets, devices) are skipped.
    """
    plan: list[tuple[Path, Path, bool]] = []
    _plan(root, source, source, target, frozenset(), plan)
    target.parent.mkdir(parents=True, exist_ok=True)
    directories: list[tuple[Path, Path]] = []
    for src, dst, is_dir in plan:
        if is_dir:
            dst.mkdir(parents=True, exist_ok=True)
            directories.append((src, dst))
        else:
            shutil.copy2(src, dst)
    for src, dst in reversed(directories):  # times after the contents, deepest first
        shutil.copystat(src, dst)


def upload_into(source: Path, target: Path) -> None:
    """Copy a host file or tree to ``target`` (a confined path)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target)
