"""Where Harbor's special paths are in an environment.

In a container (``docker``) they are where Harbor puts them: ``/logs/agent``, ``/logs/verifier``,
``/logs/artifacts``, ``/tests``, ``/solution``, and the task's working directory (``/app`` for most
Terminal-Bench 2 tasks).

On ``local`` a task cannot have the host's ``/logs`` or ``/app``, so the *workdir* layout maps them into the
task's working directory: ``/logs``, ``/tests`` and ``/solution`` go under ``<workdir>/.harbor/``, and the
task's container working directory is the working directory itself. The copies of ``tests/`` and
``solution/`` placed in the environment, and the instruction, are rewritten accordingly (an absolute path that
starts with one of those directories is replaced; nothing else changes). That serves quick checks of tasks
whose scripts stay inside those directories; a task that needs its image, or other absolute paths, needs
``docker``.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

LOGS, TESTS, SOLUTION = "/logs", "/tests", "/solution"
CONTAINER = "container"
WORKDIR = "workdir"
#: The directory of the workdir layout holding /logs, /tests and /solution.
HIDDEN = ".harbor"


@dataclass(frozen=True)
class Layout:
    """The paths of one environment session."""

    kind: str
    #: The session's working directory (a host path for ``local``).
    workdir: str
    #: The task's working directory as the task knows it (``/app``); rewritten to ``workdir`` in the workdir
    #: layout.
    task_workdir: str

    @property
    def root(self) -> str:
        return "" if self.kind == CONTAINER else f"{self.workdir.rstrip('/')}/{HIDDEN}"

    def special(self, path: str) -> str:
        """Where ``/logs/...``, ``/tests`` or ``/solution`` is."""
        return path if self.kind == CONTAINER else self.root + path

    @property
    def logs(self) -> str:
        return self.special(LOGS)

    @property
    def verifier_dir(self) -> str:
        return self.special(f"{LOGS}/verifier")

    @property
    def agent_dir(self) -> str:
        return self.special(f"{LOGS}/agent")

    @property
    def artifacts_dir(self) -> str:
        return self.special(f"{LOGS}/artifacts")

    @property
    def tests(self) -> str:
        return self.special(TESTS)

    @property
    def solution(self) -> str:
        return self.special(SOLUTION)

    def place(self, path: str) -> str:
        """Where a path the task names (absolute, or relative to its working directory) is in this
        environment."""
        if not path.startswith("/"):
            path = f"{self.task_workdir.rstrip('/')}/{path}"
        return self.rewrite(path) if self.kind == WORKDIR else path

    # -- the workdir layout's rewriting ----------------------------------------------------------------

    def _pattern(self) -> re.Pattern[str]:
        prefixes = [LOGS, TESTS, SOLUTION]
        if self.task_workdir not in ("", "/"):
            prefixes.append(self.task_workdir.rstrip("/"))
        alternatives = "|".join(re.escape(p) for p in sorted(prefixes, key=len, reverse=True))
        # An absolute path: not preceded by a path or word character, and ending at a path boundary.
        return re.compile(rf"(?<![\w./~$-])({alternatives})(?=/|[^\w.-]|$)")

    def rewrite(self, text: str) -> str:
        if self.kind == CONTAINER:
            return text
        workdir = self.workdir.rstrip("/")

        def replace(match: re.Match[str]) -> str:
            prefix = match.group(1)
            if prefix in (LOGS, TESTS, SOLUTION):
                return self.root + prefix
            return workdir

        return self._pattern().sub(replace, text)

    def staged_copy(self, source: Path, scratch: Path) -> Path:
        """``source`` (a directory of the task) as it goes into this environment: itself in a container, a
        rewritten copy under ``scratch`` in the workdir layout. Runs in a thread (it copies files)."""
        if self.kind == CONTAINER:
            return source
        target = scratch / source.name
        shutil.copytree(source, target, symlinks=True)
        for directory, _, files in os.walk(target):
            for name in files:
                path = Path(directory) / name
                if path.is_symlink():
                    continue
                try:
                    text = path.read_text(encoding="utf-8")
                except (UnicodeDecodeError, OSError):
                    continue  # binary: copied as it is
                rewritten = self.rewrite(text)
                if rewritten != text:
                    mode = path.stat().st_mode
                    path.write_text(rewritten, encoding="utf-8")
                    os.chmod(path, mode)
        return target
