"""The local environment: real subprocesses, confined files, explicit environment, timeouts that kill."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from agentcompass.builtin.local import LocalProvider, PathEscapeError, processes
from agentcompass.errors import UsageError
from agentcompass.runtime import EnvironmentSpec
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples
from tests.helpers.local_procs import kill_sleeping, start_time, unique_sleep, wait_until_gone


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


@settings(max_examples=examples(50), deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_any_path_resolves_inside_or_is_refused(tmp_path_factory, name):
    from agentcompass.builtin.local import LocalSession

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


# -- process tracking: setsid, orphans, timeouts and close ----------------------------------------------


TRACKING = [
    "tree",
    pytest.param("cgroup", marks=pytest.mark.skipif(processes.own_cgroup_dir() is None,
                                                    reason="no writable cgroup v2 here")),
]


@pytest.fixture
def duration():
    """A unique ``sleep`` duration; whatever sleeps that long when the test ends is killed by pid."""
    value = unique_sleep()
    yield value
    kill_sleeping(value)


@pytest.fixture(params=TRACKING)
async def tracked(request, tmp_path):
    provider = LocalProvider(root=str(tmp_path / "work"), processes=request.param)
    await provider.setup([], run_id="tracked")
    s = await provider.open(EnvironmentSpec(), run_id="tracked", task_id="t", base_env={})
    yield provider, s
    await provider.close(s)
    await provider.teardown()


def _pids(text: str) -> dict[int, int | None]:
    pids = [int(x) for x in text.split()]
    return {pid: start_time(pid) for pid in pids}


async def test_a_timeout_kills_processes_that_started_a_session_of_their_own(tracked, duration):
    _, s = tracked
    started = time.monotonic()
    result = await s.exec(["sh", "-c", f"setsid sleep {duration} & echo $! > bg.pid; sleep {duration}"], timeout=1)
    assert result.timed_out and time.monotonic() - started < 15
    pids = _pids(await s.read_text("bg.pid"))
    assert wait_until_gone(pids) == [], "the setsid'd sleep survived the exec timeout"


@pytest.mark.parametrize("how", ["setsid", "orphan", "orphan-without-environment"])
async def test_closing_the_session_kills_what_finished_commands_left(tracked, duration, how):
    provider, s = tracked
    if how == "orphan-without-environment" and provider.options.processes == "tree":
        pytest.skip("only a cgroup finds an orphan that dropped the marker variable and left the session")
    command = {
        "setsid": f"setsid sleep {duration} >/dev/null 2>&1 & echo $!",
        # A subshell starts the sleep and exits: the sleep is an orphan before exec even returns.
        "orphan": f"(setsid sleep {duration} >/dev/null 2>&1 & echo $!)",
        "orphan-without-environment": f"(env -i setsid sleep {duration} >/dev/null 2>&1 & echo $!)",
    }[how]
    result = await s.exec(["sh", "-c", command], timeout=30)
    pids = _pids(result.stdout)
    assert pids and all(start is not None for start in pids.values()), result
    await provider.close(s)
    assert wait_until_gone(pids) == [], f"a {how} background process outlived its session"


async def test_background_processes_that_end_are_reaped_not_left_as_zombies(tracked):
    _, s = tracked
    result = await s.exec(["sh", "-c", "sleep 0.2 & echo $!; exit 0"])
    pids = _pids(result.stdout)
    time.sleep(0.5)  # the sleep ends, as an orphan of the runtime (a subreaper)
    await s.exec(["true"])  # every exec reaps what belongs to the session
    assert wait_until_gone(pids, timeout=5) == [], "a finished background process stayed a zombie"


async def test_a_cancelled_exec_kills_its_tree(tracked, duration):
    import asyncio

    _, s = tracked
    task = asyncio.ensure_future(s.exec(["sh", "-c", f"setsid sleep {duration} & echo $! > bg.pid; wait"]))
    for _ in range(200):
        if (Path(s.workdir) / "bg.pid").exists() and (Path(s.workdir) / "bg.pid").read_text().strip():
            break
        await asyncio.sleep(0.02)
    pids = _pids(await s.read_text("bg.pid"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(wait_until_gone, pids) == [], "killed, and reaped soon after, before close"


# -- downloads do not follow symlinks out -----------------------------------------------------------------


async def test_download_refuses_a_symlink_out_of_the_working_directory(session, tmp_path):
    await session.write_text("out/ok.txt", "fine")
    os.symlink("/etc/hostname", Path(session.workdir) / "out" / "x")
    with pytest.raises(PathEscapeError, match="out/x") as caught:
        await session.download("out", tmp_path / "artifacts" / "out")
    assert isinstance(caught.value, ValueError)
    assert not (tmp_path / "artifacts" / "out").exists(), "nothing is copied from a tree that leads outside"
    with pytest.raises(PathEscapeError):
        await session.download("out/x", tmp_path / "artifacts" / "x")


async def test_download_refuses_a_deep_directory_symlink_out(session, tmp_path):
    await session.write_text("out/a/b/c.txt", "fine")
    os.symlink("/etc", Path(session.workdir) / "out" / "a" / "b" / "etc")
    with pytest.raises(PathEscapeError, match="out/a/b/etc"):
        await session.download("out", tmp_path / "d")


async def test_download_resolves_symlinks_that_stay_inside_and_refuses_loops(session, tmp_path):
    root = Path(session.workdir)
    await session.write_text("data/real.txt", "inside")
    await session.write_text("out/plain.txt", "plain")
    os.symlink("../data/real.txt", root / "out" / "link.txt")
    os.symlink(str(root / "data"), root / "out" / "datadir")
    await session.download("out", tmp_path / "d")
    copied = tmp_path / "d"
    assert (copied / "plain.txt").read_text() == "plain"
    assert (copied / "link.txt").read_text() == "inside" and not (copied / "link.txt").is_symlink()
    assert (copied / "datadir" / "real.txt").read_text() == "inside"
    os.symlink("..", root / "out" / "up")
    with pytest.raises(PathEscapeError, match="loop"):
        await session.download("out", tmp_path / "e")


# -- options --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"bogus": "1"}, "unknown local environment option 'bogus'; known: keep, processes, root"),
        ({"keep": "maybe"}, "keep='maybe': expected true or false"),
        ({"processes": "magic"}, "expected one of auto, cgroup, tree"),
        ({"root": ""}, "needs a directory"),
    ],
)
def test_bad_options_are_usage_errors_that_name_them(options, expected):
    with pytest.raises(UsageError) as caught:
        LocalProvider(**options)
    assert expected in str(caught.value)


def test_good_options():
    assert LocalProvider(keep="yes").keep is True and LocalProvider(keep="false").keep is False
    assert LocalProvider(processes="tree").options.processes == "tree"


def test_the_output_limit_is_the_shared_one():
    from agentcompass.builtin.local import session as local_env
    from agentcompass.runtime import environment

    assert local_env.OUTPUT_LIMIT is environment.OUTPUT_LIMIT


# -- run roots: owner, prune, resume ----------------------------------------------------------------------


def _fake_root(base: Path, run_id: str, pid: int, start: int | None) -> Path:
    import json

    root = base / f"agentcompass-local-{run_id}-abc123"
    (root / "task-x").mkdir(parents=True)
    (root / "task-x" / "file").write_text("left behind")
    (root / "owner.json").write_text(json.dumps({"run_id": run_id, "pid": pid, "start": start}))
    return root


def _dead_pid() -> tuple[int, int]:
    import subprocess

    proc = subprocess.Popen(["true"])
    start = start_time(proc.pid) or 1
    proc.wait()
    return proc.pid, start


async def test_prune_removes_the_roots_of_dead_runs_only(tmp_path):
    pid, start = _dead_pid()
    dead = _fake_root(tmp_path, "dead-run", pid, start)
    other_dead = _fake_root(tmp_path, "other-run", pid, start)
    alive = _fake_root(tmp_path, "live-run", os.getpid(), start_time(os.getpid()))
    stranger = tmp_path / "agentcompass-local-no-owner"
    stranger.mkdir()
    provider = LocalProvider(root=str(tmp_path))
    assert await provider.prune("dead-run") == 1
    assert not dead.exists() and other_dead.exists()
    assert await provider.prune() == 1
    assert not other_dead.exists()
    assert alive.exists() and stranger.exists(), "a live run and a directory without owner are left alone"


async def test_setup_of_a_resumed_run_clears_what_that_run_left(tmp_path):
    pid, start = _dead_pid()
    left = _fake_root(tmp_path, "resumed", pid, start)
    other = _fake_root(tmp_path, "another", pid, start)
    provider = LocalProvider(root=str(tmp_path))
    await provider.setup([], run_id="resumed")
    assert not left.exists() and other.exists()
    await provider.teardown()
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name]
