"""Programs the docker environment runs inside containers: POSIX ``sh`` snippets (dash, busybox ash and
bash all run them) and the stdlib-only gateway forwarder. Plain strings, so importing this is free.

Every snippet is passed as ``sh -c SCRIPT NAME ARG...``; arguments never go through shell quoting.
"""

from __future__ import annotations

#: Variable set on the wrapper of every ``exec`` (children inherit it unless they clear their environment):
#: how the timeout killer finds the wrapper, and one of the ways it finds the rest (see ``KILL_TREE``).
EXEC_ID_VARIABLE = "AGENTCOMPASS_EXEC_ID"

#: Where the forwarder is mounted the gateway's Unix socket inside the container.
GATEWAY_SOCKET = "/run/agentcompass/gateway.sock"

#: Defines ``ac_puts NWRITES [PATH BASE64]...``: write files (parent directories created) from base64
#: text; on failure it names the file on stderr and returns 1. ``ac_shift`` is how many arguments it used.
#: Every script below starts with it: small writes ride along with the session's next docker call.
_PUT = r"""
ac_put() {
  ac_d=${1%/*}
  if [ -n "$ac_d" ] && [ ! -d "$ac_d" ]; then mkdir -p -- "$ac_d" || return 1; fi
  printf %s "$2" | base64 -d > "$1"
}
ac_puts() {
  ac_k=$1; shift; ac_shift=$((1 + 2 * ac_k))
  while [ "$ac_k" -gt 0 ]; do
    ac_put "$1" "$2" || { printf 'agentcompass: cannot write %s\n' "$1" >&2; return 1; }
    shift 2; ac_k=$((ac_k - 1))
  done
}
"""

#: Exit status of the file scripts when a batched write failed.
WRITE_FAILED = 97

_PUTS_OR_FAIL = r"""
ac_puts "$@" || exit 97
shift "$ac_shift"
"""

#: ``EXEC_WRAPPER MARKER PORT NWRITES [PATH B64]... ARGV...``: say its pid (stderr's first line,
#: ``<RS>MARKER P <pid>``), apply batched writes, wait (once per session) until the gateway forwarder listens
#: on 127.0.0.1:PORT (hex, as in /proc/net/tcp; empty: don't), run ARGV, then end stderr with the trailer
#: ``<RS>MARKER X <status> <oom_kill before> <oom_kill after>``. ``<RS>MARKER R`` says the writes have
#: landed; ``<RS>MARKER W`` that one failed and ARGV did not run. The wrapper exits 0, so no trailer means it
#: was killed or never started. (<RS> is byte 0x1e, written by printf: the marker as it appears in argv or
#: ``ps`` never matches.) ``docker exec`` starts it as the leader of a session of its own.
EXEC_WRAPPER = (
    _PUT
    + r"""
ac_id=$1; ac_port=$2; ac_n=$3; shift 2
printf '\036%s P %s\n' "$ac_id" "$$" >&2
ac_puts "$@" || { printf '\036%s W\n' "$ac_id" >&2; exit 0; }
shift "$ac_shift"
[ "$ac_n" -gt 0 ] && printf '\036%s R\n' "$ac_id" >&2
if [ -n "$ac_port" ]; then
  ac_i=0
  while [ "$ac_i" -lt 300 ]; do
    while read -r ac_sl ac_local ac_remote ac_state ac_rest; do
      if [ "$ac_local" = "0100007F:$ac_port" ] && [ "$ac_state" = 0A ]; then break 2; fi
    done < /proc/net/tcp
    command -v python3 > /dev/null 2>&1 || break
    sleep 0.01 2> /dev/null || sleep 1
    ac_i=$((ac_i + 1))
  done
fi
ac_oom() {
  for ac_f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
    if [ -r "$ac_f" ]; then
      while read -r ac_a ac_b; do
        if [ "$ac_a" = oom_kill ]; then ac_o=$ac_b; return; fi
      done < "$ac_f"
    fi
  done
  ac_o=-
}
ac_oom; ac_o0=$ac_o
"$@"
ac_rc=$?
ac_oom
printf '\036%s X %s %s %s\n' "$ac_id" "$ac_rc" "$ac_o0" "$ac_o" >&2
exit 0
"""
)

#: ``PUTS NWRITES [PATH B64]...``: apply batched writes and nothing else.
PUTS = _PUT + _PUTS_OR_FAIL

#: ``READ NWRITES [PATH B64]... PATH``: apply batched writes, then print PATH.
READ = (
    _PUT
    + _PUTS_OR_FAIL
    + r"""
exec cat -- "$1"
"""
)

#: ``TAR_OUT NWRITES [PATH B64]... PATH``: apply batched writes, then write a tar of PATH (a file or a
#: directory, as the single top-level member named after it) to stdout.
TAR_OUT = (
    _PUT
    + _PUTS_OR_FAIL
    + r"""
cd -- "${1%/*}/" && exec tar -c -f - -- "${1##*/}"
"""
)

#: ``WRITE NWRITES [PATH B64]... PATH`` with the content on stdin.
WRITE = (
    _PUT
    + _PUTS_OR_FAIL
    + r"""
ac_d=${1%/*}
if [ -n "$ac_d" ] && [ ! -d "$ac_d" ]; then mkdir -p -- "$ac_d" || exit 1; fi
exec cat > "$1"
"""
)

#: ``UNTAR NWRITES [PATH B64]... DIR`` with a tar on stdin: extract it into DIR (created).
UNTAR = (
    _PUT
    + _PUTS_OR_FAIL
    + r"""
mkdir -p -- "$1" && exec tar -x -f - -C "$1"
"""
)

#: ``KILL_TREE ID [WRAPPER_PID]``: SIGKILL every process of one ``exec``. A process belongs to it when any of
#: these holds, so a child has to shed all of them at once to escape:
#:
#: * it is the wrapper (given, or found: the process ``docker exec`` started, ppid 0, carrying the id), or in
#:   the wrapper's session (``docker exec`` makes the wrapper a session leader);
#: * its parent belongs (members are SIGSTOPped as they are found, so no parent exits and orphans its
#:   children while the tree is walked; ``setsid`` children are found this way);
#: * it holds the exec's stdout or stderr pipe (what keeps ``docker exec`` from returning; compared with
#:   ``test -ef`` against the stopped wrapper's fds 1 and 2);
#: * its environment carries ``AGENTCOMPASS_EXEC_ID=ID`` (unless it cleared it, e.g. ``env -i``).
#:
#: The wrapper's pid is trusted only while it is ours or gone (a live stranger reusing it is ignored; the
#: kernel never reuses a pid that is still a session's id). Frozen members are killed together; passes
#: repeat until one finds nothing (a fork in flight shows up in the next one); the wrapper dies last, since
#: its fds are the pipe reference.
KILL_TREE = (
    r"""
ac_m="""
    + EXEC_ID_VARIABLE
    + r"""=$1
ac_w=$2
ac_self=$$
ac_set=" "
ac_env=" "
ac_in() { case $2 in *" $1 "*) return 0 ;; esac; return 1; }
ac_stat() {
  ac_s=
  read -r ac_s 2> /dev/null < "/proc/$1/stat" || return 1
  ac_s=${ac_s##*") "}
}
ac_scan_env() {
  ac_env=" "
  if command -v grep > /dev/null 2>&1; then
    ac_l=$(grep -l -s -F -e "$ac_m" /proc/[0-9]*/environ 2> /dev/null)
  else
    ac_l=
    for ac_f in /proc/[0-9]*/environ; do
      case $(cat "$ac_f" 2> /dev/null) in *"$ac_m"*) ac_l="$ac_l $ac_f" ;; esac
    done
  fi
  for ac_f in $ac_l; do
    ac_f=${ac_f#/proc/}
    ac_env="$ac_env${ac_f%/environ} "
  done
}
ac_holds() {
  [ -n "$ac_wfd" ] || return 1
  for ac_f in "/proc/$1"/fd/*; do
    if [ "$ac_f" -ef "/proc/$ac_w/fd/1" ] || [ "$ac_f" -ef "/proc/$ac_w/fd/2" ]; then return 0; fi
  done
  return 1
}
ac_scan_env
if [ -z "$ac_w" ]; then
  for ac_p in $ac_env; do
    ac_stat "$ac_p" && set -- $ac_s && [ "$2" = 0 ] && ac_w=$ac_p && break
  done
fi
ac_wfd=
if [ -n "$ac_w" ]; then
  if ac_in "$ac_w" "$ac_env"; then
    ac_wfd=1
    kill -STOP "$ac_w" 2> /dev/null
  elif ac_stat "$ac_w" && set -- $ac_s && [ "$1" != Z ]; then
    ac_w=
  fi
fi
ac_i=0
while [ "$ac_i" -lt 20 ]; do
  ac_i=$((ac_i + 1))
  ac_fresh=
  ac_j=0
  ac_new=1
  while [ -n "$ac_new" ] && [ "$ac_j" -lt 50 ]; do
    ac_j=$((ac_j + 1))
    ac_new=
    for ac_d in /proc/[0-9]*; do
      ac_p=${ac_d#/proc/}
      case " 1 $ac_self $ac_w$ac_set" in *" $ac_p "*) continue ;; esac
      ac_stat "$ac_p" || continue
      set -- $ac_s
      case $1 in Z | X | x) continue ;; esac
      [ "$2" = "$ac_self" ] && continue
      if [ "$4" = "$ac_w" ] || [ "$2" = "$ac_w" ] || ac_in "$2" "$ac_set" || ac_in "$ac_p" "$ac_env" \
        || ac_holds "$ac_p"; then
        kill -STOP "$ac_p" 2> /dev/null
        ac_set="$ac_set$ac_p "
        ac_fresh="$ac_fresh $ac_p"
        ac_new=1
      fi
    done
  done
  [ -z "$ac_fresh" ] && break
  kill -KILL $ac_fresh 2> /dev/null
  ac_scan_env
done
[ -n "$ac_w" ] && kill -KILL "$ac_w" 2> /dev/null
exit 0
"""
)

#: ``MAKE_WORKDIR DIR``: create DIR, as Docker's ``--workdir`` does (Podman does not). Run as root.
MAKE_WORKDIR = r"""
mkdir -p -- "$1" 2> /dev/null; exit 0
"""

#: ``MAKE_WRITABLE DIR``: let any user write DIR (sticky, like /tmp). Run as root; fails harmlessly when
#: root does not own DIR (then the image made it for its user already).
MAKE_WRITABLE = r"""
mkdir -p -- "$1" 2> /dev/null; chmod 1777 -- "$1" 2> /dev/null; exit 0
"""

#: The container's main program under ``docker-init``: keep the container alive and, when given a socket
#: and a port, start the gateway forwarder first. ``KEEPER [FORWARDER_SOURCE SOCKET PORT]``.
KEEPER = r"""
if [ "$#" -ge 3 ]; then python3 -I -S -c "$1" "$2" "$3" & fi
while :; do sleep 86400; done
"""

#: The container's main program with ``exec=server``: ``SERVER_KEEPER SOURCE SOCKET [GATEWAY_SOCKET PORT]``
#: runs the exec server: the static binary ``ac-exec-server`` next to SOCKET when the host put one there
#: (``native``), else (or when it cannot be executed here: status 126 or 127) the Python one (``_exec_server``,
#: as SOURCE) as ``python3 -I -S``. When the server exits after a ``shutdown`` request (status 86,
#: ``_exec_server.SHUTDOWN_STATUS``) the keeper exits too, and with it the container. When the image has no
#: ``python3`` (and no binary runs), or the server cannot start or stops otherwise, it says why in
#: ``no-server`` next to SOCKET and keeps the container alive (the session then falls back to ``docker exec``,
#: or fails if it was using the server).
SERVER_KEEPER = r"""
ac_dir=${2%/*}
ac_status=127
if [ -x "$ac_dir/ac-exec-server" ]; then
  ac_source=$1
  shift
  "$ac_dir/ac-exec-server" "$@"
  ac_status=$?
  set -- "$ac_source" "$@"
fi
if [ "$ac_status" -ne 126 ] && [ "$ac_status" -ne 127 ]; then
  [ "$ac_status" -eq 86 ] && exit 0
  echo "the exec server exited (status $ac_status)" > "$ac_dir/no-server"
elif command -v python3 > /dev/null 2>&1; then
  python3 -I -S -c "$@"
  ac_status=$?
  [ "$ac_status" -eq 86 ] && exit 0
  echo "the exec server exited (status $ac_status)" > "$ac_dir/no-server"
else
  echo "the image has no python3" > "$ac_dir/no-server"
fi
while :; do sleep 86400; done
"""

#: TCP 127.0.0.1:PORT → Unix socket forwarder: stdlib sockets and threads (asyncio would double its
#: start-up time, which every container pays). Runs on any Python 3 in the image. (``_exec_server`` repeats its
#: pump on purpose: each is sent into containers as self-contained source.)
FORWARDER = r"""
import socket, sys, threading

SOCKET, PORT = sys.argv[1], int(sys.argv[2])


def pump(source, sink, both):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        for s in both:  # one side broke: unblock the other direction too
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def handle(client):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(SOCKET)
    except OSError:
        client.close()
        upstream.close()
        return
    both = (client, upstream)
    back = threading.Thread(target=pump, args=(upstream, client, both), daemon=True)
    back.start()
    pump(client, upstream, both)
    back.join()
    client.close()
    upstream.close()


server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", PORT))
server.listen(128)
while True:
    connection, _ = server.accept()
    threading.Thread(target=handle, args=(connection,), daemon=True).start()
"""

#: Makes a container ready for its next task (``EnvironmentSpec.recycle``), run by an ``exec`` through its exec
#: server: ``RESET SERVER_PID WORKDIR``. Every process but PID 1, the server, its keeper and this script's own
#: ancestors is killed (``SIGKILL``, until none is left: a zombie counts as gone), then the working directory,
#: ``/tmp`` and ``/dev/shm`` are emptied. Exit status 0 only when all of that holds at the end; otherwise the
#: provider removes the container instead of handing it on.
RESET = r"""
server=$1 workdir=$2
spare=" 1 $server "
p=$$
while [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != 1 ]; do
  spare="$spare$p "
  read -r line < "/proc/$p/stat" || break
  set -- ${line##*) }
  p=$2
done
read -r line < "/proc/$server/stat" || exit 2
set -- ${line##*) }
spare="$spare$2 "
pass=0
while :; do
  left=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$spare" in *" $p "*) continue ;; esac
    read -r line 2>/dev/null < "$d/stat" || continue
    set -- ${line##*) }
    [ "$1" = Z ] && continue
    kill -9 "$p" 2>/dev/null
    left=1
  done
  [ "$left" = 0 ] && break
  pass=$((pass + 1))
  [ "$pass" -ge 50 ] && { echo "processes left after the reset" >&2; exit 3; }
  sleep 0.02
done
cd / || exit 4
for dir in "$workdir" /tmp /dev/shm; do
  [ -d "$dir" ] || continue
  rm -rf -- "$dir"/* "$dir"/.[!.]* "$dir"/..?* 2>/dev/null
  for entry in "$dir"/* "$dir"/.[!.]* "$dir"/..?*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    echo "cannot empty $dir" >&2
    exit 5
  done
done
"""
