"""The real CLI in a child process, as a user's shell runs it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The repository's root (the child processes' working directory).
ROOT = Path(__file__).resolve().parents[2]


def run_cli_subprocess(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
                       testing: bool = True) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process (with the testing plugin when ``testing``)."""
    argv = [sys.executable, "-m", "tests.helpers.cli", *args] if testing else [
        sys.executable, "-m", "agentcompass.cli.main", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, preexec_fn=default_signals)


def default_signals() -> None:
    """Reset SIGINT and SIGTERM in a child: a test suite started as a background job has SIGINT ignored, and a
    child inherits that; reset, interrupting the child behaves as Ctrl-C in a terminal does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start_cli(*args: str, env: dict[str, str] | None = None, testing: bool = True) -> subprocess.Popen[str]:
    """The real CLI in a child process that keeps running (with the testing plugin when ``testing``)."""
    argv = [sys.executable, "-m", "tests.helpers.cli" if testing else "agentcompass.cli.main", *args]
    return subprocess.Popen(argv, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})}, preexec_fn=default_signals)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file, ``[]`` when there is none."""
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def wait_for(predicate: Callable[[], object], timeout: float = 60, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def finished_run(tmp_path: Path, n: int = 4) -> Path:
    """A finished run of the testing plugin's ``scripted`` benchmark (``n`` tasks) in ``tmp_path / "r"``."""
    run_dir = tmp_path / "r"
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-b", f"n={n}", "-o", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    return run_dir
