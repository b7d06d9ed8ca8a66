"""The local environment: real subprocesses, confined files, explicit environment, timeouts that kill."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from agentcompass.builtin.local_env import LocalProvider, PathEscapeError
from agentcompass.runtime import EnvironmentSpec
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.fixture
async def session(tmp_path):
    provider = LocalProvider(root=str(tmp_path))
    await provider.setup([], run_id="test")
    s = await provider.open(EnvironmentSpec(env={"FROM_SPEC": "1"}), run_id="test", task_id="t/1",
                            base_env={"FROM_BASE": "2"})
    yield s
    await provider.close(s)
    await provider.teardown()
    assert not Path(s.workdir).exists()


async def test_exec_runs_in_the_working_directory_with_an_explicit_environment(session, monkeypatch):
    monkeypatch.setenv("HOST_SECRET", "should-not-leak")
    result = await session.exec(["python3", "-c", "import os,json;print(json.dumps([os.getcwd(), dict(os.environ)]))"],
                                env={"PER_CALL": "3"})
    import json

    cwd, env = json.loads(result.stdout)
    assert result.returncode == 0 and cwd == session.workdir
    assert env["FROM_SPEC"] == "1" and env["FROM_BASE"] == "2" and env["PER_CALL"] == "3"
    assert "HOST_SECRET" not in env
    assert env["HOME"] == session.workdir


async def test_timeout_kills_the_whole_process_tree(session):
    script = "import subprocess,time; p=subprocess.Popen(['sleep','300']); open('child.pid','w').write(str(p.pid)); time.sleep(300)"
    started = time.monotonic()
    result = await session.exec(["python3", "-c", script], timeout=1.0)
    assert result.timed_out and time.monotonic() - started < 10
    child = int((await session.read_text("child.pid")).strip())
    for _ in range(50):
        if not Path(f"/proc/{child}").exists():
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists(), "the grandchild survived the timeout"


async def test_exit_codes_and_missing_commands(session):
    assert (await session.exec(["sh", "-c", "echo out; echo err >&2; exit 7"])) .returncode == 7
    missing = await session.exec(["definitely-not-a-command-xyz"])
    assert missing.returncode == 127 and "not found" in missing.stderr


async def test_background_children_do_not_hang_exec(session):
    started = time.monotonic()
    result = await session.exec(["sh", "-c", "sleep 300 & echo started"], timeout=30)
    assert result.stdout.strip() == "started" and time.monotonic() - started < 10


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "a/../../b"])
async def test_paths_cannot_escape_the_working_directory(session, path):
    with pytest.raises(PathEscapeError, match="outside"):
        await session.write_text(path, "x")
    with pytest.raises(PathEscapeError):
        await session.read_text(path)


async def test_symlinks_cannot_escape_either(session):
    os.symlink("/etc", Path(session.workdir) / "link")
    with pytest.raises(PathEscapeError):
        await session.read_text("link/hostname")


async def test_files_and_trees_round_trip(session, tmp_path):
    data = bytes(range(256)) * 3
    await session.write_bytes("deep/dir/blob.bin", data)
    assert await session.read_bytes("deep/dir/blob.bin") == data
    await session.download("deep", tmp_path / "out")
    assert (tmp_path / "out" / "dir" / "blob.bin").read_bytes() == data
    await session.upload(tmp_path / "out", "copy")
    assert await session.read_bytes("copy/dir/blob.bin") == data
    assert (await session.exec(["cat", "copy/dir/blob.bin"])).returncode == 0


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_any_path_resolves_inside_or_is_refused(tmp_path_factory, name):
    from agentcompass.builtin.local_env import LocalSession

    root = tmp_path_factory.mktemp("w")
    s = LocalSession(root, {})
    try:
        resolved = s.resolve(name)
    except PathEscapeError:
        return
    except (ValueError, OSError):
        return  # NUL bytes and the like: refused by the OS layer
    assert resolved == root.resolve() or resolved.is_relative_to(root.resolve())


async def test_closing_the_session_kills_background_children(tmp_path):
    provider = LocalProvider(root=str(tmp_path))
    s = await provider.open(EnvironmentSpec(), run_id="r", task_id="t", base_env={})
    result = await s.exec(["sh", "-c", "sleep 300 & echo $!"])
    pid = int(result.stdout.strip())
    assert Path(f"/proc/{pid}").exists()
    await provider.close(s)
    for _ in range(50):
        if not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("a background child outlived its session")
