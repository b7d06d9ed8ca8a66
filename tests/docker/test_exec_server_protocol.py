"""The exec server's protocol without a Docker engine: the server program itself (stdlib only) run as a real
process on this host, the host side against it, and the host's own checks against a deliberately misbehaving
peer (oversized frames, output past the cap, a connection closed mid-reply)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agentcompass.errors import InfrastructureError
from agentcompass.runtime import EnvironmentSpec
from agentcompass.runtime.environment import OUTPUT_LIMIT
from agentcompass_docker import _exec_server, native
from agentcompass_docker.server_protocol import MAX_FRAME, Exchange, ServerGone, frames
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SERVER = Path(_exec_server.__file__)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)


@given(json_values)
def test_the_servers_replies_are_json(value) -> None:  # type: ignore[no-untyped-def]
    assert json.loads(_exec_server.dumps(value)) == value


@pytest.fixture(scope="session")
def native_server() -> Path:
    """The static exec server built from ``_exec_server.c`` on this host (as the provider builds it)."""
    return native.build()


@pytest.fixture(params=["python", "native"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """An exec server running on this host (as this user), on a socket in a fresh 0700 directory: the Python
    one and the static binary, which must behave alike."""
    directory = tempfile.mkdtemp(prefix="acx-test-")
    path = os.path.join(directory, "exec.sock")
    if request.param == "python":
        program = [sys.executable, "-I", "-S", str(SERVER)]
    else:
        program = [str(request.getfixturevalue("native_server"))]
    proc = await asyncio.create_subprocess_exec(*program, path)
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(path):
            assert proc.returncode is None and time.monotonic() < deadline, "the server did not start"
            await asyncio.sleep(0.01)
        yield path
    finally:
        proc.kill()
        await proc.wait()
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        os.rmdir(directory)


async def _request(path: str, header: dict, data: bytes | None = None) -> tuple[dict, dict[bytes, bytes]]:
    exchange = await Exchange.open(path, {"writes": [], **header}, data)
    got: dict[bytes, bytes] = {}
    try:
        reply = await exchange.reply(lambda kind, payload: got.__setitem__(kind, got.get(kind, b"") + payload))
    finally:
        exchange.close()
    return reply, got


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=3 * MAX_FRAME // 2), name=st.text(alphabet="abc-é_ 1", min_size=1, max_size=8))
async def test_files_and_output_are_binary_safe(server: str, tmp_path_factory, data: bytes, name: str) -> None:
    target = str(tmp_path_factory.mktemp("files") / name)
    reply, _ = await _request(server, {"op": "write", "path": target}, data)
    assert reply == {"status": 0}
    reply, got = await _request(server, {"op": "read", "path": target})
    assert reply == {"status": 0} and got.get(b"D", b"") == data
    reply, got = await _request(server, {"op": "exec", "argv": ["cat", target], "env": {}, "cwd": "/",
                                         "timeout": 30, "id": "t"})
    assert reply["status"] == 0 and got.get(b"O", b"") == data


async def test_exec_status_timeout_and_missing_program(server: str, tmp_path: Path) -> None:
    reply, got = await _request(server, {"op": "exec", "argv": ["sh", "-c", "echo $X; echo e >&2; kill -9 $$"],
                                         "env": {"X": "x"}, "cwd": str(tmp_path), "timeout": None, "id": "a"})
    assert (reply["status"], got[b"O"], got[b"R"]) == (137, b"x\n", b"e\n")
    started = time.monotonic()
    reply, _ = await _request(server, {"op": "exec", "argv": ["sh", "-c", "sleep 1011 & setsid sleep 1012"],
                                       "env": {}, "cwd": "/", "timeout": 0.3, "id": "b"})
    assert reply["timed_out"] and time.monotonic() - started < 5
    leftover = await asyncio.to_thread(subprocess.run, ["pgrep", "-f", "sleep 101[12]"], capture_output=True, text=True)
    assert leftover.stdout == "", f"a timed-out exec's processes survived: {leftover.stdout}"
    reply, got = await _request(server, {"op": "exec", "argv": ["no-such-program-x"], "env": {}, "cwd": "/",
                                         "timeout": None, "id": "c"})
    assert reply["status"] == 127 and b"not found" in got[b"R"]
    reply, _ = await _request(server, {"op": "read", "path": str(tmp_path / "missing")})
    assert reply["error"]["errno"] == 2


async def test_a_request_frame_past_the_limit_is_refused(server: str) -> None:
    reader, writer = await asyncio.open_unix_connection(server)
    writer.write(b"Q" + (MAX_FRAME + 1).to_bytes(4, "big"))
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # the server hung up without answering
    writer.close()


async def _fake_server(tmp_path: Path, reply: bytes) -> tuple[str, asyncio.AbstractServer]:
    """A peer that answers every request with ``reply`` (raw bytes) and hangs up."""
    path = str(tmp_path / "fake.sock")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(5)
        writer.write(reply)
        await writer.drain()
        writer.close()

    return path, await asyncio.start_unix_server(handle, path=path)


async def test_the_host_refuses_a_malformed_or_truncated_reply(tmp_path: Path) -> None:
    for reply, said in [
        (b"O" + (MAX_FRAME + 1).to_bytes(4, "big"), "malformed frame"),
        (b"Z" + (1).to_bytes(4, "big") + b"x", "malformed frame"),
        (frames(b"O", b"partial"), "closed the connection before it answered"),
        (frames(b"X", b"not json"), "unreadable reply"),
    ]:
        path, fake = await _fake_server(tmp_path, reply)
        try:
            exchange = await Exchange.open(path, {"op": "ping"})
            with pytest.raises(ServerGone, match=said):
                await exchange.reply(lambda kind, payload: None)
            exchange.close()
        finally:
            fake.close()
            await fake.wait_closed()
            os.unlink(path)


async def test_the_host_caps_output_even_when_the_server_does_not(tmp_path: Path) -> None:
    from agentcompass_docker.containers import ContainerPlan
    from agentcompass_docker.provider import DockerProvider
    from agentcompass_docker.server_session import ServerSession, Started

    extra = 5000
    flood = frames(b"O", b"a" * (OUTPUT_LIMIT + extra))
    done = frames(b"X", json.dumps({"status": 0, "oom": ["-", "-"], "cut": [0, 0], "timed_out": False}).encode())
    path, fake = await _fake_server(tmp_path, flood + done)
    provider = DockerProvider()
    plan = ContainerPlan("fake", "image", [], {}, user="0", memory="2g", forward_port=None)
    started = Started("x", plan, exec_dir=str(tmp_path), relay=None, fallback=None)
    session = ServerSession(provider, started, spec=EnvironmentSpec(), task_id="t", base_env={})
    session.socket = path
    try:
        result = await session.exec(["anything"])
        assert result.stdout == "a" * OUTPUT_LIMIT + f"\n[... {extra} more bytes cut]"
        session.socket = str(tmp_path / "nothing.sock")
        provider.containers.gone_reason = lambda container, settle=0.0, autoremove=False: None  # type: ignore[method-assign]
        with pytest.raises(InfrastructureError, match="has no socket any more"):
            await session.exec(["true"])
    finally:
        fake.close()
        provider.engine.shutdown()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"exec": "ssh"}, "exec='ssh': expected one of server, docker"),
        ({"prestart": "-1"}, "prestart=-1: expected 0 or more"),
        ({"prestart": "lots"}, "prestart='lots': expected a whole number"),
    ],
)
def test_bad_exec_and_prestart_options_are_usage_errors(options: dict, said: str) -> None:
    from agentcompass.errors import UsageError
    from agentcompass_docker.options import DockerOptions

    with pytest.raises(UsageError, match=re.escape(said)):
        DockerOptions.parse(options)
    assert DockerOptions.parse({"exec": "docker", "prestart": "3"}) == DockerOptions(exec="docker", prestart=3)


async def test_shutdown_is_refused_outside_its_container(server: str) -> None:
    # On this host the server's parent is not the container's keeper: `shutdown` (which kills every process it
    # sees) must not act, and the server keeps serving.
    helper = await asyncio.create_subprocess_exec("sleep", "30")
    try:
        reply, _ = await _request(server, {"op": "shutdown"})
        assert reply["error"]["message"] == "not the keeper's server: no shutdown"
        assert helper.returncode is None
        reply, got = await _request(server, {"op": "exec", "argv": ["echo", "still"], "env": {}, "cwd": "/",
                                             "timeout": 30, "id": "t"})
        assert reply["status"] == 0 and got[b"O"] == b"still\n"
    finally:
        helper.kill()
        await helper.wait()
