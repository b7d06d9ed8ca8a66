"""A terminal session relayed through a pseudo-terminal and recorded as asciicast v2 (what ``asciinema`` writes).

The file is a JSON header line (``version``, ``width``, ``height``, ``timestamp``, ``title``) and one JSON line per
event: ``[seconds since the start, "o", text]`` for what the terminal showed, ``[seconds, "i", text]`` for what was
typed. :func:`relay` runs in a worker thread; it returns when the command exits or ``stop`` is set.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import termios
import threading
import time
import tty
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

#: Seconds between looks at ``stop`` and the command while nothing happens.
TICK = 0.2


class CastWriter:
    """Appends asciicast v2 events to a file, timed from its creation."""

    def __init__(self, path: Path, width: int, height: int, title: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = path.open("w", encoding="utf-8")
        self._started = time.monotonic()
        self._decoders = {kind: codecs.getincrementaldecoder("utf-8")("replace") for kind in "io"}
        header = {"version": 2, "width": width, "height": height, "timestamp": int(time.time()), "title": title,
                  "env": {"TERM": os.environ.get("TERM", "xterm-256color")}}
        self._file.write(json.dumps(header) + "\n")

    def event(self, kind: str, data: bytes) -> None:
        text = self._decoders[kind].decode(data)
        if text:
            self._file.write(json.dumps([round(time.monotonic() - self._started, 6), kind, text]) + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


def terminal_size(fd: int) -> tuple[int, int]:
    """``(columns, rows)`` of the terminal on ``fd``; 80x24 when it is none."""
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return 80, 24
    return size.columns, size.lines


def _controlling_terminal() -> None:  # in the child, before exec
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def relay(argv: Sequence[str], cast: Path, *, title: str, banner: str, stop: threading.Event,
          on_activity: Callable[[], None] = lambda: None, stdin: int = 0, stdout: int = 1) -> int:
    """Run ``argv`` on a new pseudo-terminal, relaying this process's terminal (``stdin``/``stdout``) to it, and
    record the session in ``cast`` (``banner`` first, as output). Returns the command's exit status."""
    columns, rows = terminal_size(stdout)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    writer = CastWriter(cast, columns, rows, title)
    try:
        proc = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                                preexec_fn=_controlling_terminal)
    finally:
        os.close(slave)
    raw = os.isatty(stdin)
    saved = termios.tcgetattr(stdin) if raw else None
    try:
        if raw:
            tty.setraw(stdin)
        shown = banner.replace("\r\n", "\n").replace("\n", "\r\n").encode()
        os.write(stdout, shown)
        writer.event("o", shown)
        reading = [master, stdin]
        while not stop.is_set():
            ready, _, _ = select.select(reading, [], [], TICK)
            on_activity()  # a person at a shell is there until the shell ends
            if master in ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the shell ended and its terminal closed
                    data = b""
                if not data:
                    break
                os.write(stdout, data)
                writer.event("o", data)
            if stdin in ready:
                data = os.read(stdin, 4096)
                if not data:
                    reading.remove(stdin)  # no more input: the shell decides when it ends
                    continue
                os.write(master, data)
                writer.event("i", data)
    finally:
        if saved is not None:
            termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        writer.close()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGHUP)
        os.close(master)
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()
