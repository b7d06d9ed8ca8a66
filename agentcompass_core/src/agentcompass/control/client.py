"""The other side of ``agentcompass ctl``: one request to a running run, its reply."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from agentcompass.control.endpoint import RunLock, connect_address, socket_link
from agentcompass.errors import UsageError

#: Seconds to wait for a reply.
REPLY_TIMEOUT = 30.0


def send(run_dir: Path, request: dict[str, Any], timeout: float = REPLY_TIMEOUT) -> dict[str, Any]:
    """Send ``request`` to the run in ``run_dir`` and return its reply; :class:`UsageError` (one line, saying what
    to do) when no run is there to answer or it refused."""
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a run directory")
    lock = RunLock.of(run_dir)
    if not lock.held_by_someone():
        raise UsageError(f"no run is running in {run_dir} (it ended or was killed; an unfinished one goes on with "
                         f"agentcompass run --resume {run_dir})")
    if not (socket_link(run_dir).exists() or socket_link(run_dir).is_symlink()):
        raise UsageError(f"the run in {run_dir} (process {lock.holder().get('pid', '?')}) takes no control "
                         "requests (it was not started by agentcompass run)")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(connect_address(run_dir)))
            sock.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except PermissionError:
            raise UsageError(f"permission denied on {socket_link(run_dir)}: only the user who started the run may "
                             "steer it") from None
        except (ConnectionError, FileNotFoundError):
            raise UsageError(f"the run in {run_dir} is not answering (it may be ending); try again, or "
                             f"agentcompass run --resume {run_dir} once it has ended") from None
        except TimeoutError:
            raise UsageError(f"the run in {run_dir} did not answer within {timeout:g}s") from None
    try:
        reply = json.loads(data)
    except ValueError:
        raise UsageError(f"the run in {run_dir} closed the connection without an answer") from None
    if not reply.get("ok"):
        raise UsageError(str(reply.get("error") or "the run refused the request"))
    return dict(reply)
