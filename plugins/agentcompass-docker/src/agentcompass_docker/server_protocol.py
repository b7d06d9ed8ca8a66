"""The host side of the exec server's protocol (``_exec_server``): one asyncio Unix-socket connection per
request, length-prefixed frames (``KIND | LENGTH | PAYLOAD``, payloads at most :data:`MAX_FRAME` bytes).

The request header goes as :mod:`marshal` data (version 4: plain dicts, lists, strings and numbers), which the
server loads without importing ``json``; replies come back as JSON, parsed here (never ``marshal``: what the
container sends is not trusted).

Anything that breaks the conversation (no socket, a refused or reset connection, the connection closing
before the final ``X`` frame, a frame that is too large or of an unknown kind) is :class:`ServerGone`; the
session turns it into an :class:`~agentcompass.errors.InfrastructureError`, never into an exit status.
"""

from __future__ import annotations

import asyncio
import json
import marshal
import os
import socket
import struct
from collections.abc import Callable
from typing import Any

#: Largest payload of one frame, both ways.
MAX_FRAME = 1 << 20
_HEADER = struct.Struct(">cI")
#: Frame kinds the server sends.
SERVER_KINDS = frozenset(b"ORDWX")


class ServerGone(Exception):
    """The exec server cannot be reached or stopped answering mid-request; the message says how."""


_CREDENTIALS = struct.Struct("3i")


def peer_namespace(writer: asyncio.StreamWriter) -> str:
    """The pid namespace of the process at the other end of a Unix-socket connection (``SO_PEERCRED``), or
    "" when it cannot be told."""
    sock = writer.get_extra_info("socket")
    try:
        pid, _, _ = _CREDENTIALS.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size))
        return os.readlink(f"/proc/{pid}/ns/pid")
    except (OSError, AttributeError, struct.error):
        return ""


def frames(kind: bytes, payload: bytes = b"") -> bytes:
    """``payload`` as frames of ``kind`` (an empty payload is one empty frame)."""
    if not payload:
        return _HEADER.pack(kind, 0)
    return b"".join(
        _HEADER.pack(kind, len(payload[at : at + MAX_FRAME])) + payload[at : at + MAX_FRAME]
        for at in range(0, len(payload), MAX_FRAME)
    )


class Exchange:
    """One request on its own connection: send it, then read the reply's frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(
        cls, path: str, header: dict[str, Any], data: bytes | None = None, *, namespace: str | None = None
    ) -> Exchange:
        """Connect to ``path`` and send ``header`` (and ``data`` as ``D`` frames ending in ``E``). With
        ``namespace``, the listening process must be in that pid namespace (the container's): a socket the
        container replaced (say, by a symlink to another container's) never gets the request."""
        try:
            reader, writer = await asyncio.open_unix_connection(path)
        except FileNotFoundError:
            raise ServerGone("has no socket any more (its directory was removed)") from None
        except ConnectionRefusedError:
            raise ServerGone("does not accept connections (it has stopped)") from None
        except OSError as exc:
            raise ServerGone(f"cannot be reached ({exc.strerror or exc})") from None
        exchange = cls(reader, writer)
        if namespace is not None and peer_namespace(writer) != namespace:
            exchange.close()
            raise ServerGone("answered from outside its container (its socket was replaced)")
        message = frames(b"Q", marshal.dumps(header, 4))  # the server reads it without importing json
        if data is not None:
            message += (frames(b"D", data) if data else b"") + frames(b"E")
        try:
            writer.write(message)
            await writer.drain()
        except OSError as exc:
            exchange.close()
            raise ServerGone(f"broke the connection ({exc.strerror or exc})") from None
        return exchange

    async def frame(self) -> tuple[bytes, bytes]:
        """The next frame of the reply."""
        try:
            kind, size = _HEADER.unpack(await self.reader.readexactly(_HEADER.size))
            if size > MAX_FRAME or kind[0] not in SERVER_KINDS:
                raise ServerGone(f"sent a malformed frame ({kind!r}, {size} bytes)")
            return kind, await self.reader.readexactly(size) if size else b""
        except asyncio.IncompleteReadError:
            raise ServerGone("closed the connection before it answered") from None
        except OSError as exc:
            raise ServerGone(f"broke the connection ({exc.strerror or exc})") from None

    async def reply(self, on_frame: Callable[[bytes, bytes], None]) -> dict[str, Any]:
        """Read frames until the final ``X`` (returned, decoded); every other frame goes to ``on_frame``."""
        while True:
            kind, payload = await self.frame()
            if kind == b"X":
                try:
                    value = json.loads(payload)
                except ValueError:
                    raise ServerGone("sent an unreadable reply") from None
                if not isinstance(value, dict):
                    raise ServerGone("sent an unreadable reply")
                return value
            on_frame(kind, payload)

    def cancel(self) -> None:
        """Tell the server to kill the request's processes (an ``exec``), without waiting."""
        if not self.writer.is_closing():
            try:
                self.writer.write(frames(b"C"))
            except OSError:
                pass

    def close(self) -> None:
        self.writer.close()
