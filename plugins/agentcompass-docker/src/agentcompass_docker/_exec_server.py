"""The exec server: the first program of a docker environment's container (under ``docker-init``), run as the
session's user with ``python3 -I -S -c SOURCE SOCKET [GATEWAY_SOCKET PORT]``. Standard library only, Python
3.7 or later; it never imports agentcompass (its source is sent to the container as a string).

It listens on the Unix socket ``SOCKET`` (in a directory the host bind-mounts into this one container) and
serves one request per connection, each in a thread of its own, so the commands of one session run
concurrently. Frames both ways are ``KIND (1 byte) | LENGTH (4 bytes, big-endian) | PAYLOAD``, a payload at
most :data:`MAX_FRAME` bytes, so a peer never has to buffer more than that.

Host → server: ``Q`` the request (JSON), then for ``write``/``untar`` ``D`` data frames and an empty ``E``;
``C`` (or the connection closing) cancels an ``exec``: its processes are killed.
Server → host: ``O``/``R`` stdout/stderr of an ``exec`` (each stream capped at :data:`OUTPUT_LIMIT`, the rest
counted), ``D`` file or tar data, and last ``X`` (JSON): the status, or ``{"error": ...}``.

Requests (``writes`` first, always: ``[PATH, BASE64]...`` batched small writes, applied in order):

* ``exec``: ``argv``, ``env`` (added to the container's), ``cwd``, ``timeout`` (seconds or null), ``id`` (the
  exec's id, set as ``AGENTCOMPASS_EXEC_ID``). The command starts a session of its own; the reply is
  ``{"status", "oom": [before, after], "cut": [stdout, stderr], "timed_out"}``, the status shell-style
  (128 + signal for a killed command). On timeout or cancel every process of the exec is SIGKILLed: members
  are its session, its descendants (this server is a child subreaper, so orphans stay in reach), whatever
  holds its output pipes, and whatever carries its id in the environment; they are SIGSTOPped as they are
  found, so nobody escapes by forking while the tree is walked.
* ``read`` ``path``; ``write`` ``path`` (+ data); ``puts`` (only the writes); ``untar`` ``dir`` (+ a tar);
  ``tar`` ``path`` (a tar of it, as its single top-level member).
* ``shutdown``: SIGKILL every other process of the container (but PID 1 and this server's parent, the keeper),
  reply, then exit with :data:`SHUTDOWN_STATUS`: the keeper then exits, so does PID 1, the container stops and
  the engine removes it (it runs with ``--rm``). The host ends a session this way, without a docker call.

With a gateway socket and port, it also forwards TCP ``127.0.0.1:PORT`` to that socket (the model gateway),
before it listens for requests: the first ``exec`` never waits for the forwarder.
"""

import _socket
import _thread
import binascii
import errno
import marshal
import os
import struct
import sys
import time

# Imported in the background once the socket listens (``load_the_rest``): what only commands and file tools
# need, so that the server answers its first request as soon as possible. (``socket``, ``json`` and ``base64``
# are never imported: with what they pull in, they would double the start-up time every container pays.)
MYPY = False
if MYPY:  # what type checkers see (mypy takes MYPY as true)
    import ctypes
    import selectors
    import signal
    import subprocess
    import threading
else:
    ctypes = selectors = signal = subprocess = threading = None

MAX_FRAME = 1 << 20
OUTPUT_LIMIT = 8 * 1024 * 1024
EXEC_ID_VARIABLE = "AGENTCOMPASS_EXEC_ID"
HEADER = struct.Struct(">cI")
#: How long a killed exec's pipes may stay open before the reply goes anyway.
KILL_GRACE = 3.0
#: The server's exit status after a ``shutdown`` request (the keeper, ``_scripts.SERVER_KEEPER``, then exits).
SHUTDOWN_STATUS = 86

_waiters = {}  # type: dict[int, list]  # pid -> [threading.Event, status]
if MYPY:
    _lock = threading.Lock()
    _spawned = threading.Condition(_lock)
else:
    _lock = _spawned = None
_loaded = _thread.allocate_lock()
_loaded.acquire()  # released by load_the_rest


def load_the_rest():
    """Import what commands need, become a child subreaper, start the reaper."""
    global ctypes, selectors, signal, subprocess, threading, _lock, _spawned
    import ctypes
    import selectors
    import signal
    import subprocess
    import threading

    _lock = threading.Lock()
    _spawned = threading.Condition(_lock)
    try:  # orphans of an exec become our children, so a timeout still finds (and reaps) them
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass
    threading.Thread(target=reaper, daemon=True).start()
    _loaded.release()


def dumps(value):
    """JSON text of a reply (str, int, float, bool, None, list, dict): the host parses it with ``json``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(dumps(str(k)) + ":" + dumps(v) for k, v in value.items()) + "}"
    out = []
    for ch in str(value):
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or 0xD800 <= code < 0xE000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


# -- frames ----------------------------------------------------------------------------------------------


def send(conn, kind, payload=b""):
    for at in range(0, max(len(payload), 1), MAX_FRAME):
        piece = payload[at : at + MAX_FRAME]
        conn.sendall(HEADER.pack(kind, len(piece)) + piece)


def send_json(conn, kind, value):
    send(conn, kind, dumps(value).encode("utf-8", "surrogatepass"))


def recv_exact(conn, size):
    chunks = []
    while size:
        chunk = conn.recv(min(size, 1 << 16))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def recv_frame(conn):
    kind, size = HEADER.unpack(recv_exact(conn, HEADER.size))
    if size > MAX_FRAME:
        raise ValueError("frame too large")
    return kind, recv_exact(conn, size) if size else b""


def error_reply(exc, path):
    number = getattr(exc, "errno", None) or errno.EIO
    reason = getattr(exc, "strerror", None) or str(exc)
    return {"error": {"errno": number, "message": f"{path}: {reason}", "path": path}}


# -- processes -------------------------------------------------------------------------------------------


def reaper():
    """Reap every child (this process may be PID 1, and is a subreaper); hand statuses to their waiters."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            with _spawned:
                if not _waiters:  # a child spawned since waitpid said there is none: look again at once
                    _spawned.wait(1.0)
            continue
        except InterruptedError:
            continue
        if os.WIFSIGNALED(status):
            code = 128 + os.WTERMSIG(status)
        elif os.WIFEXITED(status):
            code = os.WEXITSTATUS(status)
        else:
            continue
        with _lock:
            waiter = _waiters.pop(pid, None)
        if waiter is not None:
            waiter[1] = code
            waiter[0].set()


def spawn(argv, **kwargs):
    """Start a child whose status the reaper delivers: (Popen, waiter)."""
    waiter = [threading.Event(), None]
    with _spawned:
        proc = subprocess.Popen(argv, **kwargs)
        _waiters[proc.pid] = waiter
        _spawned.notify_all()
    return proc, waiter


def finish(proc, waiter):
    proc.returncode = waiter[1]  # so subprocess never polls a pid that may be reused


def stat_of(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        return fields[0], int(fields[1]), int(fields[2]), int(fields[3])  # state, ppid, pgrp, session
    except (OSError, ValueError, IndexError):
        return None


def has_marker(pid, marker):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def holds(pid, pipes):
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in pipes:
                return True
        except OSError:
            pass
    return False


def kill_tree(root, marker, pipes):
    """SIGKILL every process of one exec (see the module docstring)."""

    def belongs(pid, stat, members):
        _, ppid, _, sid = stat
        return pid == root or sid == root or ppid in members or has_marker(pid, marker) or holds(pid, pipes)

    kill_matching(belongs, {1, os.getpid()})


def kill_matching(belongs, spare):
    """SIGKILL every live process but ``spare`` for which ``belongs(pid, stat, members so far)`` holds, each
    SIGSTOPped as it is found (so none forks meanwhile); passes repeat until one finds nothing."""
    for _ in range(20):
        members = set()  # type: set[int]
        fresh = True
        while fresh:
            fresh = False
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                pid = int(name)
                if pid in spare or pid in members:
                    continue
                stat = stat_of(pid)
                if stat is None or stat[0] in (b"Z", b"X", b"x") or not belongs(pid, stat, members):
                    continue
                try:
                    os.kill(pid, signal.SIGSTOP)
                except OSError:
                    continue
                members.add(pid)
                fresh = True
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def under_keeper():
    """Whether this server runs as the container's keeper's child, the keeper being PID 1 or PID 1's child:
    only then does ``shutdown`` (which kills every other process it sees) act."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    stat = stat_of(parent)
    return b"ac-server" in argv[:4] and stat is not None and (parent == 1 or stat[1] == 1)


def do_shutdown(conn):
    """Kill every process of the container but PID 1, the keeper and this server (stopped as they are found,
    so none forks meanwhile), reply, and exit: the container stops."""
    if not under_keeper():
        send_json(conn, b"X", {"error": {"errno": errno.EPERM, "message": "not the keeper's server: no shutdown"}})
        return
    kill_matching(lambda pid, stat, members: True, {1, os.getpid(), os.getppid()})
    try:
        send_json(conn, b"X", {"status": 0})
        conn.close()
    finally:
        os._exit(SHUTDOWN_STATUS)


def oom_kills():
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return value.strip()
        except OSError:
            pass
    return "-"


# -- files -----------------------------------------------------------------------------------------------


def put(path, data):
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def apply_writes(conn, writes):
    """Apply batched writes; False (after the error reply) when one failed."""
    for i in range(0, len(writes) - 1, 2):
        path = writes[i]
        try:
            put(path, binascii.a2b_base64(writes[i + 1]))
        except (OSError, ValueError, binascii.Error) as exc:
            reply = error_reply(exc, path)
            reply["error"]["message"] = "agentcompass: cannot write {} ({})".format(path, reply["error"]["message"])
            reply["error"]["batched"] = True
            send_json(conn, b"X", reply)
            return False
    return True


def receive_data(conn, sink):
    """Copy ``D`` frames into ``sink(bytes)`` until ``E``."""
    while True:
        kind, payload = recv_frame(conn)
        if kind == b"E":
            return
        if kind != b"D":
            raise ValueError(f"unexpected frame {kind!r}")
        sink(payload)


def do_read(conn, req):
    path = req["path"]
    try:
        with open(path, "rb") as f:
            while True:
                chunk = f.read(MAX_FRAME)
                if not chunk:
                    break
                send(conn, b"D", chunk)
    except OSError as exc:
        send_json(conn, b"X", error_reply(exc, path))
        return
    send_json(conn, b"X", {"status": 0})


def do_write(conn, req):
    path = req["path"]
    failure = None
    f = None
    try:
        parent = os.path.dirname(path)
        if parent and not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)
        f = open(path, "wb")
    except OSError as exc:
        failure = exc

    def sink(data):
        if f is not None:
            f.write(data)

    try:
        receive_data(conn, sink)
    except OSError as exc:
        failure = failure or exc
    finally:
        if f is not None:
            try:
                f.close()
            except OSError as exc:
                failure = failure or exc
    send_json(conn, b"X", error_reply(failure, path) if failure else {"status": 0})


def do_tool(conn, req, argv, path, feed):
    """Run a file tool (tar): its stdout as ``D`` frames, its stderr in the reply; stdin fed by ``feed``."""
    try:
        proc, waiter = spawn(argv, stdin=subprocess.PIPE if feed else subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=req.get("cwd") or "/")
    except OSError as exc:
        send_json(conn, b"X", error_reply(exc, path))
        return
    errors = []
    reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    reader.start()
    if feed:
        try:
            receive_data(conn, proc.stdin.write)
        except BrokenPipeError:
            receive_data(conn, lambda data: None)
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass
    while True:
        chunk = proc.stdout.read1(MAX_FRAME) if hasattr(proc.stdout, "read1") else proc.stdout.read(MAX_FRAME)
        if not chunk:
            break
        send(conn, b"D", chunk)
    reader.join()
    waiter[0].wait()
    finish(proc, waiter)
    stderr = b"".join(errors).decode("utf-8", "replace")
    send_json(conn, b"X", {"status": waiter[1], "stderr": stderr})


# -- exec ------------------------------------------------------------------------------------------------


def spawn_error(conn, argv, cwd, exc):
    if not os.path.isdir(cwd):
        message, status = f"agentcompass: cannot enter directory {cwd}: No such file or directory\n", 1
    elif isinstance(exc, PermissionError):
        message, status = f"agentcompass: {argv[0]}: Permission denied\n", 126
    else:
        message, status = f"agentcompass: {argv[0]}: not found\n", 127
    send(conn, b"R", message.encode())
    send_json(conn, b"X", {"status": status, "oom": ["-", "-"], "cut": [0, 0], "timed_out": False})


def do_exec(conn, req):
    argv, cwd = req["argv"], req["cwd"]
    marker = ("{}={}".format(EXEC_ID_VARIABLE, req["id"])).encode()
    env = dict(os.environ)
    env.update(req.get("env") or {})
    env[EXEC_ID_VARIABLE] = req["id"]
    timeout = req.get("timeout")
    oom_before = oom_kills()
    try:
        proc, waiter = spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                             env=env, start_new_session=True)
    except OSError as exc:
        spawn_error(conn, argv, cwd, exc)
        return
    started = time.monotonic()
    deadline = started + timeout if timeout is not None else None
    streams = {proc.stdout.fileno(): (b"O", 0), proc.stderr.fileno(): (b"R", 1)}
    pipes = set()
    for fd in streams:
        try:
            pipes.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    sent, cut = [0, 0], [0, 0]
    selector = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    selector.register(conn, selectors.EVENT_READ)
    conn_fd = conn.fileno()
    timed_out = cancelled = False
    kill_deadline = None
    listening = True  # for the host's cancel
    try:
        while len(selector.get_map()) > listening or not waiter[0].is_set():
            now = time.monotonic()
            if kill_deadline is None and (cancelled or (deadline is not None and now >= deadline)):
                timed_out = not cancelled
                kill_tree(proc.pid, marker, pipes)
                kill_deadline = time.monotonic() + KILL_GRACE
            elif kill_deadline is not None and now >= kill_deadline:
                break
            if kill_deadline is not None:
                wait = 0.05
            elif deadline is not None:
                wait = max(0.0, min(1.0, deadline - now))
            else:
                wait = 1.0
            if len(selector.get_map()) == listening:  # the pipes are closed: only the status is missing
                events = selector.select(0) if listening else []
                if not events:
                    waiter[0].wait(min(wait, 0.05))
            else:
                events = selector.select(wait)
            for key, _ in events:
                if key.fd == conn_fd:
                    try:
                        data = conn.recv(64)
                    except OSError:
                        data = b""
                    if not data or data[:1] == b"C":
                        cancelled = True
                        selector.unregister(conn)
                        listening = False
                    continue
                fd = key.fd
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    selector.unregister(fd)
                    continue
                kind, index = streams[fd]
                room = OUTPUT_LIMIT - sent[index]
                if room < len(chunk):
                    cut[index] += len(chunk) - max(room, 0)
                    chunk = chunk[: max(room, 0)]
                if chunk:
                    sent[index] += len(chunk)
                    try:
                        send(conn, kind, chunk)
                    except OSError:  # the host is gone: nobody waits for this exec any more
                        cancelled = True
                        if listening:
                            selector.unregister(conn)
                            listening = False
    finally:
        selector.close()
        proc.stdout.close()
        proc.stderr.close()
    if not waiter[0].is_set():
        kill_tree(proc.pid, marker, pipes)
        waiter[0].wait(KILL_GRACE)
    finish(proc, waiter)
    status = waiter[1] if waiter[1] is not None else 137
    reply = {"status": status, "oom": [oom_before, oom_kills()], "cut": cut, "timed_out": timed_out,
             "cancelled": cancelled}
    try:
        send_json(conn, b"X", reply)
    except OSError:
        pass


# -- serving ---------------------------------------------------------------------------------------------


def handle(conn):
    try:
        kind, payload = recv_frame(conn)
        if kind != b"Q":
            return
        req = marshal.loads(payload)  # from the host, which is trusted (replies to it are JSON)
        if req.get("op") != "ping":
            with _loaded:
                pass
        writes = req.get("writes") or []
        if not apply_writes(conn, writes):
            if req["op"] in ("write", "untar"):
                receive_data(conn, lambda data: None)
            return
        if writes:
            send(conn, b"W")  # the batched writes have landed
        op = req["op"]
        if op == "exec":
            do_exec(conn, req)
        elif op == "read":
            do_read(conn, req)
        elif op == "write":
            do_write(conn, req)
        elif op == "puts":
            send_json(conn, b"X", {"status": 0})
        elif op == "untar":
            directory = req["dir"]
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as exc:
                receive_data(conn, lambda data: None)
                send_json(conn, b"X", error_reply(exc, directory))
                return
            do_tool(conn, req, ["tar", "-x", "-f", "-", "-C", directory], directory, True)
        elif op == "tar":
            path = req["path"]
            parent, base = os.path.split(path)
            if not os.path.lexists(path):
                send_json(conn, b"X", error_reply(FileNotFoundError(errno.ENOENT, "No such file or directory"), path))
                return
            do_tool(conn, dict(req, cwd=parent or "/"), ["tar", "-c", "-f", "-", "--", base], path, False)
        elif op == "ping":
            send_json(conn, b"X", {"status": 0, "pid": os.getpid()})
        elif op == "shutdown":
            do_shutdown(conn)
        else:
            send_json(conn, b"X", {"error": {"errno": errno.EINVAL, "message": f"unknown request {op!r}"}})
    except (EOFError, OSError, ValueError):
        pass
    finally:
        try:
            conn.close()
        except OSError:
            pass


# pump and forward repeat _scripts.FORWARDER's on purpose: this file is sent alone, stdlib only, as source.
def pump(source, sink, both):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
        sink.shutdown(_socket.SHUT_WR)
    except OSError:
        for s in both:
            try:
                s.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass


def forward(client, gateway):
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(gateway)
    except OSError:
        client.close()
        upstream.close()
        return
    both = (client, upstream)
    done = _thread.allocate_lock()
    done.acquire()

    def back():
        try:
            pump(upstream, client, both)
        finally:
            done.release()

    _thread.start_new_thread(back, ())
    pump(client, upstream, both)
    done.acquire()
    client.close()
    upstream.close()


def accept_forever(server, target, *args):
    while True:
        try:
            fd, _ = server._accept()
        except InterruptedError:
            continue
        except OSError:
            time.sleep(0.01)  # out of file descriptors, say: try again
            continue
        _thread.start_new_thread(target, (_socket.socket(fileno=fd), *args))


def main():
    path = sys.argv[1]
    if len(sys.argv) >= 4:
        tcp = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        tcp.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", int(sys.argv[3])))
        tcp.listen(128)
        _thread.start_new_thread(accept_forever, (tcp, forward, sys.argv[2]))
    try:
        os.unlink(path)
    except OSError:
        pass
    server = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    server.bind(path + ".new")
    os.chmod(path + ".new", 0o600)
    server.listen(128)
    os.rename(path + ".new", path)  # the socket appears only once it accepts
    _thread.start_new_thread(load_the_rest, ())
    accept_forever(server, handle)


if __name__ == "__main__":
    main()
