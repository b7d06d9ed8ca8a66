"""The tmux session Terminus 2 works in, inside the task's environment: a port of Harbor 0.25.0's
``TmuxSession`` onto :meth:`EnvironmentSession.exec` (every tmux command is one ``exec``).

Kept as Harbor has it: the session's start command (``TERM=xterm-256color``, a 160x40 pane running
``bash --login``, the pane piped to a log file), the history limit, keystrokes sent with ``tmux send-keys``
(batched under tmux's command-length limit; a key too long for one command goes through a paste buffer), the
waits, and the observation — the new output since the last capture (``New Terminal Output:``) or the visible
screen (``Current Terminal Screen:``). Installing tmux when the image lacks it uses the image's package manager,
as Harbor does (it needs the network; an offline task image must have tmux). Not ported: asciinema recording.
Added: each session has a tmux server of its own (``TMUX_TMPDIR``), so sessions sharing a machine (``local``)
do not meet.
"""

from __future__ import annotations

import asyncio
import base64
import re
import shlex
import time
import uuid
from collections.abc import Mapping

from agentcompass.runtime import EnvironmentSession, ExecResult
from agentcompass.runtime.logs import get_logger

log = get_logger(plugin="harnesses")

#: ``bash -c COMMAND``, or ``sh -c`` where there is no bash (Harbor's environments run commands with bash).
_SHELL = ["sh", "-c", 'if command -v bash >/dev/null 2>&1; then exec bash -c "$0"; else exec sh -c "$0"; fi']

_INSTALL_COMMANDS = {
    "apt-get": "DEBIAN_FRONTEND=noninteractive apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
               "{packages}",
    "dnf": "dnf install -y {packages}",
    "yum": "yum install -y {packages}",
    "apk": "apk add --no-cache {packages}",
    "pacman": "pacman -S --noconfirm {packages}",
    "brew": "brew install {packages}",
    "pkg": "ASSUME_ALWAYS_YES=yes pkg install -y {packages}",
    "zypper": "zypper install -y -n {packages}",
}


class TmuxError(RuntimeError):
    """tmux could not be started or driven in the environment."""


class TmuxSession:
    _ENTER_KEYS = frozenset({"Enter", "C-m", "KPEnter", "C-j", "^M", "^J"})
    _ENDS_WITH_NEWLINE_PATTERN = r"[\r\n]$"
    _NEWLINE_CHARS = "\r\n"
    _TMUX_COMPLETION_COMMAND = "; tmux wait -S done"
    _TMUX_SEND_KEYS_MAX_COMMAND_LENGTH = 16_000
    _TMUX_COMMAND_TOO_LONG_MARKER = "command too long"
    _PASTE_BASE64_CHUNK_LEN = 65_536
    _TOOL_INSTALL_TIMEOUT_SEC = 120

    def __init__(self, env: EnvironmentSession, *, session_name: str = "terminus-2",
                 logging_path: str | None = None, pane_width: int = 160, pane_height: int = 40,
                 extra_env: Mapping[str, str] | None = None) -> None:
        self.env = env
        self._session_name = session_name
        self._pane_width = pane_width
        self._pane_height = pane_height
        self._extra_env = dict(extra_env or {})
        self._previous_buffer: str | None = None
        #: What :meth:`start` did to get tmux: ``"present"`` or the install command it ran.
        self.tmux_source = "present"
        #: A tmux server of this session's own (its socket's directory): sessions that share a machine (the
        #: ``local`` environment, several tasks at once) do not share the session name.
        self._tmux_tmpdir = f"/tmp/agentcompass-tmux-{uuid.uuid4().hex[:12]}"
        #: Where the pane's output is piped (Harbor: ``/logs/agent/terminus_2.pane``, its agent log directory).
        self._logging_path = logging_path or f"{self._tmux_tmpdir}/terminus_2.pane"

    async def _exec(self, command: str, timeout: float | None = None) -> ExecResult:
        return await self.env.exec([*_SHELL, command], timeout=timeout, env={"TMUX_TMPDIR": self._tmux_tmpdir})

    # -- start ------------------------------------------------------------------------------------------------

    async def _ensure_tmux(self) -> None:
        if (await self._exec("tmux -V")).returncode == 0:
            return
        manager = None
        for name in _INSTALL_COMMANDS:
            if (await self._exec(f"which {name} >/dev/null 2>&1")).returncode == 0:
                manager = name
                break
        if manager is None:
            raise TmuxError("tmux is not installed in the task's environment and no package manager was found to "
                            "install it; use an image with tmux")
        command = _INSTALL_COMMANDS[manager].format(packages="tmux")
        done = await self._exec(command, timeout=self._TOOL_INSTALL_TIMEOUT_SEC)
        if done.returncode != 0 or (await self._exec("tmux -V")).returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["timed out" if done.timed_out else ""]
            raise TmuxError(f"tmux is not installed in the task's environment and installing it with {manager} "
                            f"failed ({detail[0]}); use an image with tmux (an environment without network cannot "
                            "install it)")
        self.tmux_source = command

    @property
    def _tmux_start_session(self) -> str:
        env_options = "".join(f"-e {shlex.quote(f'{key}={value}')} " for key, value in self._extra_env.items())
        return (
            f"export TERM=xterm-256color && "
            f"export SHELL=/bin/bash && "
            f"tmux new-session {env_options}-x {self._pane_width} -y {self._pane_height} -d -s {self._session_name} "
            f"'bash --login' \\; "
            f"pipe-pane -t {self._session_name} "
            f"'cat > {self._logging_path}'"
        )

    async def start(self) -> None:
        await self._ensure_tmux()
        directory = self._logging_path.rsplit("/", 1)[0] or "/"
        await self._exec(f"mkdir -p {shlex.quote(self._tmux_tmpdir)} {shlex.quote(directory)}")
        started = await self._exec(self._tmux_start_session)
        if started.returncode != 0:
            raise TmuxError(f"failed to start the tmux session: {started.stderr.strip()}")
        history = await self._exec("tmux set-option -g history-limit 10000000")
        if history.returncode != 0:
            log.debug("terminus2.history_limit_failed", stderr=history.stderr.strip())

    async def close(self) -> None:
        """Remove the tmux server's socket directory (the session itself is left running, as Harbor leaves it,
        for whatever the agent started in it until the environment goes); best effort."""
        try:
            await self._exec(f"rm -rf {shlex.quote(self._tmux_tmpdir)}", timeout=30)
        except Exception as exc:  # the environment may be gone already
            log.debug("terminus2.cleanup_failed", error=str(exc)[:200])

    async def is_session_alive(self) -> bool:
        return (await self._exec(f"tmux has-session -t {self._session_name}")).returncode == 0

    # -- keys -------------------------------------------------------------------------------------------------

    def _is_enter_key(self, key: str) -> bool:
        return key in self._ENTER_KEYS

    def _ends_with_newline(self, key: str) -> bool:
        return re.search(self._ENDS_WITH_NEWLINE_PATTERN, key) is not None

    def _is_executing_command(self, key: str) -> bool:
        return self._is_enter_key(key) or self._ends_with_newline(key)

    def _prevent_execution(self, keys: list[str]) -> list[str]:
        keys = keys.copy()
        while keys and self._is_executing_command(keys[-1]):
            if self._is_enter_key(keys[-1]):
                keys.pop()
            else:
                stripped_key = keys[-1].rstrip(self._NEWLINE_CHARS)
                if stripped_key:
                    keys[-1] = stripped_key
                else:
                    keys.pop()
        return keys

    def _prepare_keys(self, keys: str | list[str], block: bool) -> tuple[list[str], bool]:
        if isinstance(keys, str):
            keys = [keys]
        if not block or not keys or not self._is_executing_command(keys[-1]):
            return keys, False
        keys = self._prevent_execution(keys)
        keys.extend([self._TMUX_COMPLETION_COMMAND, "Enter"])
        return keys, True

    @staticmethod
    def _utf8_len(s: str) -> int:
        return len(s.encode("utf-8"))

    @property
    def _send_keys_prefix(self) -> str:
        return "tmux send-keys -t " + shlex.quote(self._session_name) + " --"

    @property
    def _max_escaped_key_length(self) -> int:
        return self._TMUX_SEND_KEYS_MAX_COMMAND_LENGTH - self._utf8_len(self._send_keys_prefix) - 1

    def _send_keys_command(self, keys: list[str]) -> str:
        return self._send_keys_prefix + " " + " ".join(shlex.quote(key) for key in keys)

    def _key_requires_paste(self, key: str) -> bool:
        return self._utf8_len(shlex.quote(key)) > self._max_escaped_key_length

    def _batch_keys_for_send(self, keys: list[str]) -> list[list[str]]:
        max_len = self._TMUX_SEND_KEYS_MAX_COMMAND_LENGTH
        prefix_len = self._utf8_len(self._send_keys_prefix)
        batches: list[list[str]] = []
        batch: list[str] = []
        batch_len = prefix_len
        for key in keys:
            addition = 1 + self._utf8_len(shlex.quote(key))
            if batch and batch_len + addition > max_len:
                batches.append(batch)
                batch = []
                batch_len = prefix_len
            batch.append(key)
            batch_len += addition
        if batch:
            batches.append(batch)
        return batches

    def _send_error(self, action: str, command: str, result: ExecResult) -> TmuxError:
        return TmuxError(f"failed to send {action} keys: command={command!r:.100}, "
                         f"return_code={result.returncode}, stderr={result.stderr!r}, stdout={result.stdout!r}")

    def _is_command_too_long_error(self, result: ExecResult) -> bool:
        return result.returncode != 0 and self._TMUX_COMMAND_TOO_LONG_MARKER in (result.stderr or "")

    async def _paste_key(self, key: str, action: str) -> None:
        if not key:
            return
        token = uuid.uuid4().hex
        quoted_path = shlex.quote(f"/tmp/.runtime-tmux-paste-{token}")
        buffer_name = f"runtime-paste-{token}"
        payload = base64.b64encode(key.encode("utf-8")).decode("ascii")

        async def run(command: str) -> None:
            result = await self._exec(command)
            if result.returncode != 0:
                raise self._send_error(action, command, result)

        try:
            for offset in range(0, len(payload), self._PASTE_BASE64_CHUNK_LEN):
                chunk = payload[offset: offset + self._PASTE_BASE64_CHUNK_LEN]
                redirect = ">>" if offset else ">"
                await run(f"printf %s {chunk} | base64 -d {redirect} {quoted_path}")
            await run(f"tmux load-buffer -b {buffer_name} {quoted_path} && "
                      f"tmux paste-buffer -d -b {buffer_name} -t {shlex.quote(self._session_name)}")
        finally:
            await self._exec(f"rm -f {quoted_path}")

    async def _send_single_key(self, key: str, action: str) -> None:
        command = self._send_keys_command([key])
        result = await self._exec(command)
        if result.returncode == 0:
            return
        if self._is_command_too_long_error(result):
            await self._paste_key(key, action)
            return
        raise self._send_error(action, command, result)

    async def _send_key_batches(self, keys: list[str], action: str) -> None:
        for batch in self._batch_keys_for_send(keys):
            command = self._send_keys_command(batch)
            result = await self._exec(command)
            if result.returncode == 0:
                continue
            if self._is_command_too_long_error(result):
                for key in batch:
                    await self._send_single_key(key, action)
                continue
            raise self._send_error(action, command, result)

    async def _send_keys_to_session(self, keys: list[str], action: str) -> None:
        batch: list[str] = []
        for key in keys:
            if self._key_requires_paste(key):
                if batch:
                    await self._send_key_batches(batch, action)
                    batch = []
                await self._paste_key(key, action)
            else:
                batch.append(key)
        if batch:
            await self._send_key_batches(batch, action)

    async def send_keys(self, keys: str | list[str], block: bool = False, min_timeout_sec: float = 0.0,
                        max_timeout_sec: float = 180.0) -> None:
        """Send ``keys``; without ``block``, wait until ``min_timeout_sec`` passed since sending began; with it,
        wait for the command to finish (``tmux wait``), raising :class:`TimeoutError` after
        ``max_timeout_sec``."""
        prepared, is_blocking = self._prepare_keys(keys, block)
        started = time.monotonic()
        if is_blocking:
            await self._send_keys_to_session(prepared, action="blocking")
            result = await self._exec(f"timeout {max_timeout_sec}s tmux wait done")
            if result.returncode != 0:
                raise TimeoutError(f"Command timed out after {max_timeout_sec} seconds")
            return
        await self._send_keys_to_session(prepared, action="non-blocking")
        elapsed = time.monotonic() - started
        if elapsed < min_timeout_sec:
            await asyncio.sleep(min_timeout_sec - elapsed)

    # -- screen -----------------------------------------------------------------------------------------------

    async def capture_pane(self, capture_entire: bool = False) -> str:
        extra = " -S -" if capture_entire else ""
        result = await self._exec(f"tmux capture-pane -p{extra} -t {self._session_name}")
        return result.stdout or ""

    def _find_new_content(self, current_buffer: str) -> str | None:
        # As Harbor has it (the index of the last newline is taken in the previous buffer).
        pb = "" if self._previous_buffer is None else self._previous_buffer.strip()
        if pb in current_buffer:
            idx = current_buffer.index(pb)
            if "\n" in pb:
                idx = pb.rfind("\n")
            return current_buffer[idx:]
        return None

    async def get_incremental_output(self) -> str:
        """The output since the last call (``New Terminal Output:``), or the visible screen (``Current Terminal
        Screen:``) the first time, when nothing is new, or when the new part cannot be told."""
        current_buffer = await self.capture_pane(capture_entire=True)
        if self._previous_buffer is None:
            self._previous_buffer = current_buffer
            return f"Current Terminal Screen:\n{await self.capture_pane()}"
        new_content = self._find_new_content(current_buffer)
        self._previous_buffer = current_buffer
        if new_content is not None and new_content.strip():
            return f"New Terminal Output:\n{new_content}"
        return f"Current Terminal Screen:\n{await self.capture_pane()}"
