"""How one ``exec`` talks to its wrapper inside the container (``_scripts.EXEC_WRAPPER``), and how its
processes are killed.

The wrapper reports on stderr with marker lines ``<RS>MARKER KIND ...`` that are cut out of the output:
``P <pid>`` (its pid, first), ``R`` (batched writes landed), ``W`` (a batched write failed, the command did
not run) and the trailer ``X <status> <oom_kill before> <oom_kill after>``. No trailer means the wrapper
never finished: killed, never started, or its container went away.

A timed-out or cancelled ``exec`` is ended by ``_scripts.KILL_TREE``, run as a ``docker exec`` of its own,
again and again until the exec's ``docker exec`` returns: killing the docker client alone would leave the
processes running in the container.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from agentcompass.runtime.environment import OUTPUT_LIMIT
from agentcompass.runtime.types import ExecResult

from agentcompass_docker import _scripts
from agentcompass_docker.engine import Engine, file_error

#: How long a timed-out ``exec`` may take to return once its processes are killed.
KILL_GRACE = 5.0
#: How long a cancelled ``exec``'s processes are hunted in the background.
CANCEL_KILL_WINDOW = 30.0
#: Pause between two kill passes while the exec's ``docker exec`` has not returned.
KILL_RETRY = 0.5


def wrapper_argv(marker: str, port: str, writes: Sequence[str], argv: Sequence[str]) -> list[str]:
    """The ``docker exec`` command line of one exec: the wrapper, its marker, the gateway port (hex, or
    empty), the batched writes, then the caller's command."""
    return ["sh", "-c", _scripts.EXEC_WRAPPER, "ac-exec", marker, port, *writes, *argv]


class ExecOutput:
    """Collects an ``exec``'s output in the worker thread and picks out the wrapper's marker lines.

    python-on-whales delivers output line by line, so a marker line (which ends in a newline) always ends
    its chunk; text before it on the same line is output without a final newline.
    """

    def __init__(self, marker: bytes, on_landed: Callable[[], None]) -> None:
        self.marker = marker
        self.on_landed = on_landed
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.cut = {"stdout": 0, "stderr": 0}
        self.trailer: list[bytes] | None = None
        self.write_failed = False
        #: The wrapper's pid inside the container, once it said it (read by the killer's thread).
        self.wrapper_pid = ""

    def feed(self, source: str, chunk: bytes) -> None:
        if source == "stderr":
            at = chunk.find(self.marker)
            if at >= 0:
                fields = chunk[at + len(self.marker) :].split()
                chunk = chunk[:at]
                kind = fields[0] if fields else b""
                if kind == b"P" and len(fields) > 1 and fields[1].isdigit():
                    self.wrapper_pid = fields[1].decode()
                elif kind == b"R":
                    self.on_landed()
                elif kind == b"W":
                    self.write_failed = True
                elif kind == b"X":
                    self.trailer = fields[1:]
        buffer = self.stdout if source == "stdout" else self.stderr
        room = OUTPUT_LIMIT - len(buffer)
        if room >= len(chunk):
            buffer.extend(chunk)
        else:
            buffer.extend(chunk[: max(room, 0)])
            self.cut[source] += len(chunk) - max(room, 0)

    def text(self, source: str) -> str:
        data = bytes(self.stdout if source == "stdout" else self.stderr)
        if self.cut[source]:
            data += f"\n[... {self.cut[source]} more bytes cut]".encode()
        return data.decode("utf-8", "replace")


def exec_result(output: ExecOutput, *, timed_out: bool, docker_rc: int | None, memory: str) -> ExecResult:
    """The result of a finished (or timed-out) exec. Without a trailer the wrapper did not finish; the caller
    has checked by then that the container is still there, so the docker client's status is reported."""
    stdout, stderr = output.text("stdout"), output.text("stderr")
    if output.write_failed:
        raise file_error("(batched write)", stderr)
    if timed_out:
        return ExecResult(returncode=-9, stdout=stdout, stderr=stderr, timed_out=True)
    if output.trailer is None:
        return ExecResult(returncode=docker_rc or -1, stdout=stdout, stderr=stderr)
    status, oom_before, oom_after = [*output.trailer, b"-", b"-", b"-"][:3]
    returncode = int(status) if status.isdigit() else -1
    if oom_before.isdigit() and oom_after.isdigit() and int(oom_after) > int(oom_before):
        if returncode == 137:  # SIGKILL, as the shell reports it
            returncode = -9
        sep = "" if not stderr or stderr.endswith("\n") else "\n"
        stderr += f"{sep}killed: out of memory (limit {memory})\n"
    return ExecResult(returncode=returncode, stdout=stdout, stderr=stderr)


def kill_until_returned(
    engine: Engine,
    container: str,
    user: str,
    exec_id: str,
    output: ExecOutput,
    call: Future[Any],
    seconds: float,
    stop: Callable[[], bool],
) -> None:
    """Kill the processes of one exec until its ``docker exec`` (``call``) returns, for at most ``seconds``
    or until ``stop()``. Blocking: a worker thread. Repeating covers a wrapper the engine starts only after
    the first pass (a deadline that passed before the command even started)."""
    deadline = time.monotonic() + seconds
    while True:
        with contextlib.suppress(Exception):
            engine.docker.container.execute(
                container, ["sh", "-c", _scripts.KILL_TREE, "ac-kill", exec_id, output.wrapper_pid], user=user
            )
        with contextlib.suppress(Exception):
            call.result(timeout=min(KILL_RETRY, max(0.0, deadline - time.monotonic())))
        if call.done() or time.monotonic() >= deadline or stop():
            return
