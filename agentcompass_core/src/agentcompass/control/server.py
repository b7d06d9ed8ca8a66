"""The run's side of ``agentcompass ctl``: a unix socket server in the run directory, owner-only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from agentcompass.control.endpoint import RunLock, peer_allowed, peer_uid, socket_address, socket_link
from agentcompass.errors import UsageError

#: Bytes one request line may hold.
MAX_REQUEST = 64 * 1024

#: ``handler(request, uid) -> reply``: what an action does (:class:`agentcompass.control.steering.Steering`).
Handler = Callable[[dict[str, Any], int], dict[str, Any]]


@attrs.define
class ControlServer:
    """Serves one run's control socket while the run runs. :meth:`start` takes the run's lock first."""

    run_dir: Path
    handler: Handler
    #: Told of what the server met: ``(event, fields)`` (``control.refused``, ``control.stale_socket``).
    on_event: Callable[[str, dict[str, Any]], None] = lambda event, fields: None
    lock: RunLock = attrs.field(init=False)
    _server: asyncio.AbstractServer | None = None
    _bound: Path | None = None

    def __attrs_post_init__(self) -> None:
        self.lock = RunLock.of(self.run_dir)

    async def start(self) -> None:
        self.lock.acquire()
        try:
            link, address = socket_link(self.run_dir), socket_address(self.run_dir)
            for stale in {link, address}:  # we hold the lock: a socket here is a killed run's
                if stale.exists() or stale.is_symlink():
                    stale.unlink()
                    self.on_event("control.stale_socket", {"path": str(stale)})
            self._server = await asyncio.start_unix_server(self._serve, path=str(address), limit=MAX_REQUEST)
            os.chmod(address, 0o600)
            self._bound = address
            if address != link:
                link.symlink_to(address)
        except OSError as exc:
            self.lock.release()
            raise UsageError(f"cannot serve the control socket of {self.run_dir}: {exc}") from None
        except BaseException:
            self.lock.release()
            raise

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        for path in {socket_link(self.run_dir), self._bound}:
            if path is not None:
                with contextlib.suppress(OSError):
                    path.unlink()
        self.lock.release()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            uid = peer_uid(writer.get_extra_info("socket"))
            line = await reader.readline()  # read first: a refused peer still gets its answer, not a reset
            if not peer_allowed(uid, os.getuid()):
                self.on_event("control.refused", {"uid": uid})
                reply: dict[str, Any] = {"ok": False, "error": f"refused: uid {uid} does not own this run (uid "
                                                               f"{os.getuid()} does)"}
            else:
                reply = self._answer(line, uid)
            writer.write(json.dumps(reply, default=str).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _answer(self, line: bytes, uid: int) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except ValueError:
            return {"ok": False, "error": "a control request is one JSON object on one line"}
        if not isinstance(request, dict) or not isinstance(request.get("action"), str):
            return {"ok": False, "error": "a control request needs an 'action'"}
        try:
            return self.handler(request, uid)
        except UsageError as exc:
            return {"ok": False, "error": str(exc)}
