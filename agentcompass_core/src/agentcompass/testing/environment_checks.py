"""Conformance checks of environment providers: ``exec`` runs in the working directory, its timeout kills the
whole process tree, and paths stay confined to the working directory.

::

    await check_environment_provider("my_env")              # all of them
    async with local_session() as env:
        await check_exec_timeout_kills_tree(env)             # or one at a time, in a session you hold
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from agentcompass.errors import describe
from agentcompass.runtime.environment import EnvironmentSession
from agentcompass.runtime.types import EnvironmentSpec
from agentcompass.testing.host import host_workdir
from agentcompass.testing.sessions import environment_sessions

_ALIVE_SCRIPT = """
for p in {pids}; do
  if [ -r /proc/$p/stat ]; then
    state=$(cut -d')' -f2 < /proc/$p/stat | cut -c2)
    [ "$state" = Z ] || [ -z "$state" ] || echo $p
  elif kill -0 $p 2>/dev/null; then
    echo $p
  fi
done
"""


def _alive_on_host(pid: int, marker: bytes) -> bool:
    """Is ``pid`` a live (not zombie) process of the host whose command line holds ``marker``? The command
    line is compared so that a recycled pid never counts."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[:1]
    return marker in cmdline and state != ["Z"]


async def _alive(env: EnvironmentSession, pids: dict[int, bytes], on_host: bool) -> list[int]:
    if on_host and await asyncio.to_thread(Path("/proc").is_dir):
        return [p for p, marker in pids.items() if _alive_on_host(p, marker)]
    result = await env.exec(["sh", "-c", _ALIVE_SCRIPT.format(pids=" ".join(map(str, pids)))], timeout=30)
    return [int(p) for p in result.stdout.split() if p.isdigit()]


async def check_exec_timeout_kills_tree(
    env: EnvironmentSession, *, detached: bool = False, timeout: float = 1.0, slack: float = 10.0,
    grace: float = 5.0, seconds: int = 300,
) -> None:
    """``exec(..., timeout=)`` on expiry kills the whole process tree and reports ``timed_out`` promptly.

    The command is ``sh -c "sleep 300 & echo $$ $! > FILE; exec sleep 300"``; with ``detached`` the background
    child starts a session of its own (``setsid sleep 300``), which a kill of the process group alone misses.
    After the timeout both sleepers must be gone (or zombies) within ``grace`` seconds: checked on the host
    (``/proc``, by pid and command line) when the session runs on the host, else by an ``exec`` inside the
    environment. Whatever the outcome, the check kills what it started.
    """
    name = f"agentcompass-check-{secrets.token_hex(4)}.pids"
    sleep = f"sleep {int(seconds)}"
    child = f"setsid {sleep}" if detached else sleep
    on_host = await host_workdir(env) is not None
    started = time.monotonic()
    result = await env.exec(["sh", "-c", f"{child} & echo $$ $! > {name}; exec {sleep}"], timeout=timeout)
    elapsed = time.monotonic() - started
    pids: dict[int, bytes] = {}
    try:
        if not result.timed_out:
            raise AssertionError(
                f"exec(timeout={timeout}) of a command sleeping {seconds} s did not report timed_out "
                f"(returncode={result.returncode}, stderr={result.stderr.strip()[-200:]!r})"
            )
        if elapsed > timeout + slack:
            raise AssertionError(f"exec(timeout={timeout}) returned only after {elapsed:.1f} s")
        try:
            marker = sleep.replace(" ", "\x00").encode()
            pids = {int(p): marker for p in (await env.read_text(name)).split()}
        except Exception as exc:
            raise AssertionError(f"the command's pid file {name} is unreadable: {describe(exc)}") from exc
        deadline = time.monotonic() + grace
        alive = await _alive(env, pids, on_host)
        while alive and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            alive = await _alive(env, pids, on_host)
        if alive:
            what = "in a session of its own (setsid) " if detached else ""
            raise AssertionError(
                f"process(es) {alive} of a timed-out exec {what}survived {grace} s after the timeout: "
                "a timeout must kill the whole process tree"
            )
    finally:
        if pids:  # never leave a sleeper behind, whatever the outcome
            if on_host:
                for pid, marker in pids.items():
                    if _alive_on_host(pid, marker):
                        with contextlib.suppress(OSError):
                            os.kill(pid, 9)
                for _ in range(50):  # until the kernel has ended them
                    if not any(_alive_on_host(pid, marker) for pid, marker in pids.items()):
                        break
                    await asyncio.sleep(0.05)
            else:
                with contextlib.suppress(Exception):
                    await env.exec(["kill", "-9", *map(str, pids)], timeout=30)
        with contextlib.suppress(Exception):
            await env.exec(["rm", "-f", name], timeout=30)


async def _raises(call: Any) -> BaseException | None:
    try:
        await call
    except Exception as exc:
        return exc
    return None


async def check_paths_confined(env: EnvironmentSession) -> None:
    """Paths given to the session stay inside the environment: writing or reading ``../x``, an absolute path
    outside the working directory, or through a symlink pointing out, either raises or (a container) acts
    inside the environment — it never touches the host outside the working directory."""
    token = secrets.token_hex(8)
    host_dir = await host_workdir(env)
    workdir = host_dir or Path(env.workdir)
    outside = Path(tempfile.mkdtemp(prefix="agentcompass-outside-"))
    bait_dir = host_dir.parent if host_dir is not None else None
    bait = f"agentcompass-bait-{token}.txt"
    link = f"agentcompass-link-{token}"
    created: list[Path] = [outside]
    try:
        (outside / "secret.txt").write_text(token)
        if bait_dir is not None:
            (bait_dir / bait).write_text(token)
            created.append(bait_dir / bait)
        await env.exec(["ln", "-s", str(outside), link], timeout=30)

        writes = {
            f"../agentcompass-escape-{token}.txt": workdir.parent / f"agentcompass-escape-{token}.txt",
            str(outside / "written.txt"): outside / "written.txt",
            f"{link}/via-link.txt": outside / "via-link.txt",
        }
        created.extend(writes.values())
        for path, host_target in writes.items():
            error = await _raises(env.write_text(path, token))
            if host_target.exists() and host_target.read_text(errors="replace") == token:
                raise AssertionError(
                    f"write_text({path!r}) wrote {host_target} on the host, outside the working directory"
                )
            if error is None:
                back = await _raises(env.read_text(path))
                if back is not None:
                    raise AssertionError(f"write_text({path!r}) reported success, but reading it back raised "
                                         f"{describe(back)}")
                if host_dir is not None:
                    raise AssertionError(
                        f"write_text({path!r}) accepted a path leading outside the working directory; on the host "
                        "file system that must raise"
                    )

        reads = [str(outside / "secret.txt"), f"{link}/secret.txt"]
        if bait_dir is not None:
            reads.append(f"../{bait}")
        for read in reads:
            try:
                content = await env.read_text(read)
            except Exception:
                continue
            if content == token:
                raise AssertionError(f"read_text({read!r}) read a host file outside the working directory")
        if bait_dir is not None:
            local = outside / "downloaded.txt"
            error = await _raises(env.download(f"../{bait}", local))
            if error is None and local.exists() and local.read_text() == token:
                raise AssertionError(f"download('../{bait}') copied a host file from outside the working directory")
    finally:
        for leftover in created:
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    leftover.unlink()
        with contextlib.suppress(Exception):
            await env.exec(["rm", "-f", link], timeout=30)


async def check_exec_in_workdir(env: EnvironmentSession) -> None:
    """``exec`` runs in the working directory, and relative paths of file calls resolve against it."""
    name = f"agentcompass-check-{secrets.token_hex(4)}.txt"
    token = secrets.token_hex(8)
    await env.write_text(name, token)
    try:
        result = await env.exec(["cat", name], timeout=30)
        if result.returncode != 0 or result.stdout.strip() != token:
            raise AssertionError(f"exec(['cat', {name!r}]) did not read the file write_text({name!r}) wrote: "
                                 f"exec does not run in the working directory ({result.stderr.strip()[-200:]!r})")
        absolute = await env.exec(["cat", f"{env.workdir.rstrip('/')}/{name}"], timeout=30)
        if absolute.stdout.strip() != token:
            raise AssertionError(f"a relative path did not resolve against workdir {env.workdir!r}")
    finally:
        with contextlib.suppress(Exception):
            await env.exec(["rm", "-f", name], timeout=30)


async def check_environment_provider(
    provider: Any, *, spec: EnvironmentSpec | None = None, host: Any = None, options: dict[str, Any] | None = None,
    detached: bool = True,
) -> None:
    """Every environment check on one session of ``provider`` (a registered name, a class or factory, or an
    instance): exec runs in the working directory, a timeout kills the process tree (with ``detached``, also
    a child in a session of its own), and paths are confined."""
    async with environment_sessions(provider, specs=[spec or EnvironmentSpec()], host=host,
                                    options=options) as sessions:
        env = await sessions.open(spec, task_id="conformance")
        await check_exec_in_workdir(env)
        await check_exec_timeout_kills_tree(env)
        if detached:
            await check_exec_timeout_kills_tree(env, detached=True)
        await check_paths_confined(env)
