"""Placing a directory of the task (``tests/``, ``solution/``) into an environment.

A small tree goes as one ``write_bytes`` per file, which the ``docker`` environment batches into the session's
next call (the script that moves the tree into place), so it costs no call of its own; executable bits are
restored by that script. A large tree, or one with symlinks, goes with ``upload``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

from agentcompass.runtime import EnvironmentSession

#: A tree is written file by file when it has at most this many files, each and all together this small.
MAX_FILES = 64
MAX_FILE_BYTES = 48 * 1024
MAX_TOTAL_BYTES = 192 * 1024


@dataclass(frozen=True)
class Tree:
    """A host directory, read when it is small enough to be written file by file."""

    root: Path
    #: ``(relative path, bytes)`` of every file, or ``None`` when the tree goes with ``upload``.
    files: tuple[tuple[str, bytes], ...] | None
    #: Relative paths of the executable files (their bit is restored in the environment).
    executables: tuple[str, ...] = ()


def read_tree(root: Path) -> Tree:
    """Runs in a thread."""
    files: list[tuple[str, bytes]] = []
    executables: list[str] = []
    total = 0
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            path = Path(directory) / name
            if path.is_symlink() or not path.is_file():
                return Tree(root, None)
            size = path.stat().st_size
            total += size
            if size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES or len(files) >= MAX_FILES:
                return Tree(root, None)
            relative = path.relative_to(root).as_posix()
            files.append((relative, path.read_bytes()))
            if os.access(path, os.X_OK):
                executables.append(relative)
    if not files:  # an empty directory: upload creates it
        return Tree(root, None)
    return Tree(root, tuple(files), tuple(executables))


async def put_tree(env: EnvironmentSession, source: Path, target: str) -> list[str]:
    """Place ``source`` at ``target`` in the environment; returns the files whose executable bit the next
    script must restore (``chmod +x``), relative to ``target``."""
    tree = await asyncio.to_thread(read_tree, source)
    if tree.files is None:
        await env.upload(source, target)
        return []
    for relative, data in tree.files:
        await env.write_bytes(f"{target}/{relative}", data)
    return list(tree.executables)
