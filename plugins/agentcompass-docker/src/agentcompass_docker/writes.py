"""Batched writes: small ``write_bytes`` calls wait (at most ``write_delay``) to ride along with the session's
next docker call as ``NWRITES [PATH B64]...`` arguments of its script, which saves a ``docker exec`` per file
in the common "write inputs, then run" pattern. Sent on their own when nothing comes along in time or the
batch grows large; a batched write that fails is raised by the session's next operation."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable

#: Writes up to this size are batched into the next docker call; larger ones go at once.
BATCH_FILE_LIMIT = 64 * 1024
#: A batch is sent as soon as it holds this many bytes.
BATCH_TOTAL_LIMIT = 256 * 1024


class WriteBatch:
    """The pending small writes of one session.

    :param delay: seconds a write may wait for a call to ride along with (0: no batching).
    :param send: sends a batch on its own (the arguments of ``_scripts.PUTS``); raises when a write failed.
    :param closed_error: the error for any use after :meth:`shutdown`.
    """

    def __init__(
        self,
        delay: float,
        send: Callable[[list[str]], Awaitable[None]],
        closed_error: Callable[[], BaseException],
    ) -> None:
        self.delay = delay
        self._send = send
        self._closed_error = closed_error
        self.closed = False
        self._pending: list[tuple[str, bytes]] = []
        self._size = 0
        self._landed: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()

    def accepts(self, data: bytes) -> bool:
        """Whether a write of ``data`` is batched (else the caller sends it at once, after :meth:`take`)."""
        return self.delay > 0 and len(data) <= BATCH_FILE_LIMIT

    async def add(self, path: str, data: bytes) -> None:
        if self.closed:
            raise self._closed_error()
        self._pending.append((path, data))
        self._size += len(data)
        if self._size >= BATCH_TOTAL_LIMIT:
            await self.flush()
            self.raise_error()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.delay, self._start_flush)

    async def take(self) -> tuple[list[str], asyncio.Future[None] | None]:
        """Hand the pending writes to the caller's docker call, as ``NWRITES [PATH B64]...`` arguments.

        Earlier batches land first. The caller passes the returned future to :meth:`resolve` once the writes
        have landed (or failed), so that later operations wait for them.
        """
        if self.closed:
            raise self._closed_error()
        if self._landed is not None and not self._landed.done():
            await asyncio.shield(self._landed)
        self.raise_error()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return ["0"], None
        args = [str(len(self._pending))]
        for path, data in self._pending:
            args += [path, base64.b64encode(data).decode("ascii")]
        self._pending, self._size = [], 0
        landed = asyncio.get_running_loop().create_future()
        self._landed = landed
        return args, landed

    @staticmethod
    def resolve(landed: asyncio.Future[None] | None) -> None:
        if landed is not None and not landed.done():
            landed.set_result(None)

    def raise_error(self) -> None:
        """Raise (once) the error of a batch that failed on its own."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _start_flush(self) -> None:
        self._timer = None
        task = asyncio.ensure_future(self.flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def flush(self) -> None:
        """Send pending writes on their own; an error is raised by the session's next operation."""
        try:
            args, landed = await self.take()
        except Exception as exc:  # an earlier error: keep it for the next operation
            self._error = exc
            return
        if landed is None:
            return
        try:
            await self._send(args)
        except Exception as exc:
            self._error = exc
        finally:
            self.resolve(landed)

    def shutdown(self) -> None:
        """Forget pending writes: the container is going away."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending.clear()
        for task in list(self._flushes):
            task.cancel()
