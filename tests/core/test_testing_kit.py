"""The plugin authors' test kit, agentcompass.testing: runs, sessions, fake models, conformance checks, and
its pytest plugin."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from agentcompass import hookimpl
from agentcompass.runtime import (
    BaseBenchmark,
    EnvironmentProvider,
    EnvironmentSession,
    ExecResult,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.testing import (
    DELIBERATE_ERROR,
    LoopbackOpenAI,
    RecordingProvider,
    RegistrationError,
    ScriptedModel,
    check_benchmark,
    check_collect_does_not_score,
    check_environment_provider,
    check_evaluate_keeps_error,
    check_exec_in_workdir,
    check_exec_timeout_kills_tree,
    check_paths_confined,
    check_prepare_idempotent,
    environment_sessions,
    local_session,
    make_provider,
    open_session,
    registered,
    run_benchmark,
    scripted,
    text,
    tool_call,
)

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]

# -- the README's squares benchmark, and broken variants ---------------------------------------------------

from tests.helpers.squares_plugin import SquaresBenchmark  # noqa: E402  (the README's plugin)

SQUARE_SCORES = {"sq0": 1.0, "sq1": 0.0, "sq2": 1.0, "sq3": 0.0}


class SquaresPlugin:
    @hookimpl
    def register_benchmarks(self, register):
        register("squares", SquaresBenchmark)


class PrepareFailsTheSecondTime(SquaresBenchmark):
    async def prepare_task(self, task, req, plan, env=None):
        made = await env.exec(["mkdir", "squares_runner"])
        if made.returncode != 0:
            raise RuntimeError(f"mkdir failed: {made.stderr.strip()}")
        return await super().prepare_task(task, req, plan, env)


class PrepareCounts(SquaresBenchmark):
    def __init__(self, **options):
        super().__init__(**options)
        self.calls = 0

    async def prepare_task(self, task, req, plan, env=None):
        self.calls += 1
        prepared = await super().prepare_task(task, req, plan, env)
        return replace(prepared, metadata={**prepared.metadata, "call": self.calls})


class PrepareAppends(SquaresBenchmark):
    async def prepare_task(self, task, req, plan, env=None):
        old = (await env.exec(["cat", "log.txt"])).stdout
        await env.write_text("log.txt", old + "prepared\n")
        return await super().prepare_task(task, req, plan, env)


class EvaluateOverwritesError(SquaresBenchmark):
    async def evaluate(self, task, prepared, result, req, plan, env=None):
        return replace(result, status=TaskStatus.COMPLETED, error=None, metrics={"score": 0.0})


class EvaluateRaisesOnError(SquaresBenchmark):
    async def evaluate(self, task, prepared, result, req, plan, env=None):
        return replace(result, metrics={"score": float(result.artifacts["official_result"]["reward"])})


class CollectScores(SquaresBenchmark):
    async def collect_artifacts(self, task, prepared, result, req, plan, env=None):
        return replace(result, metrics={"score": 1.0})


class CollectForgetsErrors(SquaresBenchmark):
    async def collect_artifacts(self, task, prepared, result, req, plan, env=None):
        return replace(result, status=TaskStatus.COMPLETED, error=None)


# -- runs through the real lifecycle ----------------------------------------------------------------------


async def test_run_benchmark_with_a_class(tmp_path: Path):
    run = await run_benchmark(SquaresBenchmark, run_dir=tmp_path / "run")
    assert run.exit_code == 0 and run.run_dir == tmp_path / "run"
    assert run.summary["status_counts"] == {"COMPLETED": 4} and run.summary["benchmark"] == "squares"
    assert run.request.harness == "none" and run.request.model == "mock"
    assert run.metric("score") == SQUARE_SCORES == run.metric()
    assert {r.task_id: r.final_answer for r in run.results} == {"sq0": "0", "sq1": "1", "sq2": "4", "sq3": "9"}
    assert all(isinstance(r, RunResult) and r.status is TaskStatus.COMPLETED for r in run.results)
    assert run.result("sq2").artifacts["official_result"] == {"final_answer": "4", "reward": 1.0}
    assert len(run.records) == 4 and run.records[0]["status"] == "COMPLETED"
    assert (tmp_path / "run" / "summary.json").is_file() and run.attempts == []
    with pytest.raises(KeyError, match="sq9"):
        run.result("sq9")


async def test_run_benchmark_with_trials(tmp_path: Path):
    run = await run_benchmark(SquaresBenchmark, task_ids=["sq0", "sq1"], trials=2, run_dir=tmp_path / "run")
    assert sorted((r.task_id, r.trial) for r in run.results) == [("sq0", 1), ("sq0", 2), ("sq1", 1), ("sq1", 2)]
    assert run.metric(trial=2) == run.metric() == {"sq0": 1.0, "sq1": 0.0}
    assert run.result("sq1", trial=2).final_answer == "1"


async def test_registered_name_options_and_subset(agentcompass_host, agentcompass_register, agentcompass_run):
    record = agentcompass_register(SquaresPlugin(), "squares-plugin")
    assert record.registers == {"benchmark": ["squares"]}
    run = await agentcompass_run("squares", task_ids=["sq1", "sq2"], concurrency=1)
    assert run.summary["benchmark"] == "squares" and run.summary["n_tasks"] == 2
    assert run.metric() == {"sq1": 0.0, "sq2": 1.0}
    assert run.run_dir.parent.name.startswith("test_registered_name")  # under tmp_path


def test_register_fixture_unregisters_after_the_test(agentcompass_host, agentcompass_register):
    agentcompass_register(SquaresPlugin(), "squares-plugin")
    assert "squares" in agentcompass_host.names("benchmark")


async def test_an_instance_under_a_taken_name_and_error_results(agentcompass_host, agentcompass_register,
                                                                agentcompass_run):
    agentcompass_register(SquaresPlugin(), "squares-plugin")

    class Broken(SquaresBenchmark):
        async def run_task(self, task, prepared, req, plan, env=None):
            raise RuntimeError("the runner exploded")

    run = await agentcompass_run(Broken(), limit=2)
    assert run.summary["benchmark"].startswith("squares-kit")  # "squares" is taken
    assert run.exit_code == 1
    assert run.statuses == {"sq0": TaskStatus.RUN_ERROR, "sq1": TaskStatus.RUN_ERROR}
    assert all("the runner exploded" in r.error for r in run.results)
    assert "squares-kit1" not in agentcompass_host.names("benchmark")  # the temporary plugin is gone


def test_registered_fails_with_the_records_error():
    from agentcompass.plugins import load_plugins

    class Clashing:
        @hookimpl
        def register_environments(self, register):
            register("local", lambda: None)

    host = load_plugins()
    with pytest.raises(RegistrationError, match=r"'clash'.*environment 'local'.*'builtin'"):
        with registered(host, Clashing(), "clash"):
            pass  # pragma: no cover
    assert "clash" not in host.records
    with registered(host, SquaresPlugin(), "squares-plugin") as record:
        assert record.loaded and "squares" in host.names("benchmark")
    assert "squares" not in host.names("benchmark")


def test_register_fixture_fails_the_test_with_the_error(pytester: pytest.Pytester):
    pytester.makepyfile(textwrap.dedent("""
        from agentcompass import hookimpl

        class Clashing:
            @hookimpl
            def register_environments(self, register):
                register("local", lambda: None)

        def test_clash(agentcompass_register, agentcompass_host):
            agentcompass_register(Clashing(), "clash")
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*plugin 'clash' failed to register*local*builtin*"])


async def test_function_harness_and_scripted_model(tmp_path: Path):
    class Echo(BaseBenchmark):
        name = "echo"

        def load_tasks(self, req):
            return [TaskSpec(task_id="t", data={"question": "what is 6 x 7?"})]

        async def evaluate(self, task, prepared, result, req, plan, env=None):
            if result.status is not TaskStatus.COMPLETED:
                return replace(result, metrics={})
            return replace(result, metrics={"score": float(result.final_answer == "42")})

    async def act(task, prepared, req, plan, env):
        reply = await plan.models["agent"].chat([{"role": "user", "content": task.data["question"]}])
        await env.write_text("answer.txt", reply.content)
        return RunResult(task_id=task.task_id, status=TaskStatus.COMPLETED, final_answer=reply.content)

    model = ScriptedModel(scripted(text("42")))
    run = await run_benchmark(Echo, act, model, run_dir=tmp_path / "r")
    assert run.exit_code == 0 and run.metric() == {"t": 1.0}
    assert model.requests[0]["messages"] == [{"role": "user", "content": "what is 6 x 7?"}]
    trajectory = run.trajectories
    assert len(trajectory) == 1 and trajectory[0]["response"]["content"] == "42"
    # a bare responder function works too, and so does a ModelError as an HTTP-style tuple
    run = await run_benchmark(Echo, act, lambda body: (429, {"error": {"message": "slow down"}}),
                              run_dir=tmp_path / "r2")
    # (a 429 past the client's retries is a provider outage: the task stays unfinished, recorded as an attempt)
    assert run.exit_code == 1 and run.results == [] and run.summary["n_unfinished"] == 1
    assert "slow down" in (tmp_path / "r2" / "attempts.jsonl").read_text()


async def test_recording_provider_sees_the_commands(tmp_path: Path):
    spy = RecordingProvider(make_provider("local"))
    run = await run_benchmark(SquaresBenchmark, environment=spy, task_ids=["sq3"], run_dir=tmp_path / "r")
    assert run.exit_code == 0 and run.metric() == {"sq3": 0.0}
    assert [e.argv[:3] for e in spy.execs] == [["python3", "-m", "squares_runner.runner"]]
    assert spy.execs[0].result is not None and spy.execs[0].result.returncode == 0
    assert ("sq3", "request.json") in spy.writes
    assert [t for t, _ in spy.opened] == ["sq3"] and spy.closed == ["sq3"]


# -- sessions ---------------------------------------------------------------------------------------------


async def test_local_session_is_real_and_closed_after():
    async with local_session(base_env={"GREETING": "hi"}) as env:
        workdir = Path(env.workdir)
        assert workdir.is_dir()
        await env.write_text("a/b.txt", "x")
        out = await env.exec(["sh", "-c", 'cat a/b.txt; echo " $GREETING"; pwd'])
        assert out.stdout.split() == ["x", "hi", str(workdir)]
    for _ in range(50):  # removal runs in the background
        if not workdir.exists():
            break
        await asyncio.sleep(0.05)
    assert not workdir.exists()


async def test_agentcompass_session_fixture(agentcompass_session):
    assert (await agentcompass_session.exec(["true"])).returncode == 0
    assert Path(agentcompass_session.workdir).is_dir()


async def test_environment_sessions_opens_several_and_closes_them_all():
    async with environment_sessions("local") as envs:
        a, b = await envs.open(), await envs.open(task_id="second")
        assert a.workdir != b.workdir and Path(b.workdir).name.startswith("second")
        await envs.close(a)
        assert envs.sessions == [b]
    await asyncio.sleep(0.2)
    assert not Path(b.workdir).exists()


async def test_open_session_closes_on_error():
    with pytest.raises(RuntimeError, match="inside"):
        async with open_session() as env:
            workdir = Path(env.workdir)
            raise RuntimeError("inside")
    await asyncio.sleep(0.2)
    assert not workdir.exists()


# -- benchmark conformance checks --------------------------------------------------------------------------


async def test_benchmark_checks_pass_on_a_correct_benchmark():
    await check_benchmark(SquaresBenchmark())
    await check_benchmark(SquaresBenchmark, TaskSpec(task_id="sq7", category="odd", data={"n": 7}))
    await check_benchmark(SquaresBenchmark(), environment=make_provider("local"))  # one provider, three sessions
    await check_evaluate_keeps_error(SquaresBenchmark(), statuses=list(TaskStatus)[1:])


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (PrepareFailsTheSecondTime, r"not idempotent: called a second time .* raised RuntimeError: mkdir failed"),
        (PrepareCounts, r"not idempotent: the second call on task 'sq0' returned a different PreparedTask"),
        (PrepareAppends, r"not idempotent: the second call on task 'sq0' changed files of the environment: log.txt"),
    ],
)
async def test_check_prepare_idempotent_fails_on_a_broken_benchmark(broken, message):
    with pytest.raises(AssertionError, match=message):
        await check_prepare_idempotent(broken())
    with pytest.raises(AssertionError, match=message):
        await check_benchmark(broken())


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (EvaluateOverwritesError, r"evaluate overwrote an earlier error: given status=RUN_ERROR .* returned "
                                  r"status=COMPLETED error=None"),
        (EvaluateRaisesOnError, r"evaluate raised on a RUN_ERROR result instead of returning it .*KeyError"),
    ],
)
async def test_check_evaluate_keeps_error_fails_on_a_broken_benchmark(broken, message):
    with pytest.raises(AssertionError, match=message):
        await check_evaluate_keeps_error(broken())
    with pytest.raises(AssertionError, match=message):
        await check_benchmark(broken())


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (CollectScores, r"collect_artifacts scored: given metrics \{\}, it returned \{'score': 1.0\}"),
        (CollectForgetsErrors, r"collect_artifacts overwrote an earlier error: given status=RUN_ERROR"),
    ],
)
async def test_check_collect_does_not_score_fails_on_a_broken_benchmark(broken, message):
    with pytest.raises(AssertionError, match=message):
        await check_collect_does_not_score(broken())
    with pytest.raises(AssertionError, match=message):
        await check_benchmark(broken())


async def test_checks_use_a_given_session_and_say_why_collect_crashed():
    class CollectNeedsTheRun(SquaresBenchmark):
        async def collect_artifacts(self, task, prepared, result, req, plan, env=None):
            return replace(result, artifacts={**result.artifacts, "answer": await env.read_text("result.json")})

    async with local_session() as env:
        await check_prepare_idempotent(SquaresBenchmark(), env=env)
        assert await env.read_text("request.json") == '{"n": 0}'
        with pytest.raises(AssertionError, match=r"collect_artifacts raised on a COMPLETED result.*pass result="):
            await check_collect_does_not_score(CollectNeedsTheRun(), env=env)
        await env.write_text("result.json", "{}")
        await check_collect_does_not_score(CollectNeedsTheRun(), env=env)
    assert DELIBERATE_ERROR.startswith("agentcompass.testing")


# -- environment conformance checks -----------------------------------------------------------------------


class NaiveSession(EnvironmentSession):
    """A deliberately careless local session: kills only the direct child on a timeout, and (unless
    ``confined``) joins any path onto its working directory."""

    def __init__(self, root: Path, *, kill_tree: bool, confined: bool) -> None:
        self.root = root
        self.workdir = str(root)
        self.kill_tree = kill_tree
        self.confined = confined

    def _path(self, path: str) -> Path:
        resolved = (self.root / path).resolve()
        if self.confined and not resolved.is_relative_to(self.root.resolve()):
            raise PermissionError(f"{path} leads outside")
        return resolved

    async def exec(self, argv: Sequence[str], *, timeout: float | None = None,
                   env: Mapping[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        with tempfile.TemporaryFile() as out:  # a file, not a pipe: a surviving child cannot hold it open
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=self.root, env={"PATH": os.environ["PATH"], **(env or {})},
                stdout=out, stderr=asyncio.subprocess.DEVNULL, start_new_session=self.kill_tree,
            )
            try:
                async with asyncio.timeout(timeout):
                    await proc.wait()
            except TimeoutError:
                if self.kill_tree:
                    os.killpg(proc.pid, 9)
                else:
                    proc.kill()
                await proc.wait()
                return ExecResult(-9, "", "", timed_out=True)
            out.seek(0)
            return ExecResult(proc.returncode or 0, out.read().decode(), "")

    async def read_bytes(self, path: str) -> bytes:
        return self._path(path).read_bytes()

    async def write_bytes(self, path: str, data: bytes) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def upload(self, local_path, path: str) -> None:
        raise NotImplementedError

    async def download(self, path: str, local_path) -> None:
        Path(local_path).write_bytes(self._path(path).read_bytes())


class NaiveProvider(EnvironmentProvider):
    name = "naive"

    def __init__(self, root: Path, *, kill_tree: bool = True, confined: bool = True) -> None:
        self.root, self.kill_tree, self.confined = root, kill_tree, confined

    async def open(self, spec, *, run_id, task_id, base_env):
        workdir = self.root / "envs" / task_id
        workdir.mkdir(parents=True, exist_ok=True)
        return NaiveSession(workdir, kill_tree=self.kill_tree, confined=self.confined)

    async def close(self, session):
        pass


async def test_environment_checks_pass_on_local():
    await check_environment_provider("local", detached=False)


@pytest.mark.docker
async def test_environment_checks_pass_on_docker():
    from agentcompass.errors import EnvironmentUnavailable
    from agentcompass.plugins import load_plugins

    if "docker" not in load_plugins().names("environment"):
        pytest.skip("no docker environment is registered")
    try:
        await check_environment_provider("docker")  # setsid children included
    except EnvironmentUnavailable as exc:  # raised by the provider's setup, before any check
        pytest.skip(f"docker is unavailable: {exc}")


async def test_local_exec_timeout_kills_a_setsid_child():
    async with local_session() as env:
        await check_exec_timeout_kills_tree(env, detached=True, seconds=318)
    assert _live_sleepers(318) == []


async def test_environment_checks_pass_on_a_careful_provider(tmp_path: Path):
    await check_environment_provider(NaiveProvider(tmp_path), detached=False)


def _live_sleepers(seconds: int) -> list[int]:
    """Live (not zombie) ``sleep SECONDS`` processes of the host."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == f"sleep\0{seconds}\0".encode() and (
                    (proc / "stat").read_text().rpartition(")")[2].split()[0] != "Z"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


async def test_check_exec_timeout_fails_when_only_the_parent_dies(tmp_path: Path):
    async with open_session(NaiveProvider(tmp_path, kill_tree=False)) as env:
        started = time.monotonic()
        with pytest.raises(AssertionError, match=r"survived 1.0 s after the timeout: a timeout must kill the whole"):
            await check_exec_timeout_kills_tree(env, grace=1.0, seconds=317)
        assert time.monotonic() - started < 15
    assert _live_sleepers(317) == []  # the check killed what it started


async def test_check_paths_confined_fails_on_an_unconfined_session(tmp_path: Path):
    async with open_session(NaiveProvider(tmp_path, confined=False)) as env:
        with pytest.raises(AssertionError, match=r"write_text\('\.\./agentcompass-escape-.*'\) wrote .* on the host"):
            await check_paths_confined(env)
    leftovers = [p.name for p in (tmp_path / "envs").iterdir() if p.name.startswith("agentcompass-escape")]
    assert leftovers == []  # the check cleaned up after itself


async def test_check_paths_confined_accepts_writes_that_stay_inside(tmp_path: Path):
    class Sandboxed(NaiveSession):
        """Like a container: absolute paths and '..' map into its own root, never onto the host."""

        def _path(self, path: str) -> Path:
            inside = Path("/" + path.lstrip("/")).resolve()  # '..' stops at the sandbox's /
            return self.root / "fs" / inside.relative_to("/")

    class SandboxProvider(NaiveProvider):
        async def open(self, spec, *, run_id, task_id, base_env):
            (self.root / "fs").mkdir(parents=True, exist_ok=True)
            return Sandboxed(self.root, kill_tree=True, confined=False)

    async with open_session(SandboxProvider(tmp_path)) as env:
        await check_paths_confined(env)


async def test_check_exec_in_workdir_fails_when_exec_runs_elsewhere(tmp_path: Path):
    class Elsewhere(NaiveSession):
        async def exec(self, argv, *, timeout=None, env=None, cwd=None):
            return await super().exec(["sh", "-c", 'cd / && exec "$@"', "sh", *argv], timeout=timeout)

    class ElsewhereProvider(NaiveProvider):
        async def open(self, spec, *, run_id, task_id, base_env):
            return Elsewhere(self.root, kill_tree=True, confined=True)

    async with open_session(ElsewhereProvider(tmp_path)) as env:
        with pytest.raises(AssertionError, match="exec does not run in the working directory"):
            await check_exec_in_workdir(env)


# -- fake models ------------------------------------------------------------------------------------------


def _post(url: str, body: Any, key: str | None = "agentcompass-test-key") -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_loopback_openai_serves_a_responder():
    steps = scripted(tool_call("lookup", "c1", key="k"), (503, {"error": {"message": "busy"}}), (200, b"garbage"),
                     then=text("bye"))
    with LoopbackOpenAI(steps) as server:
        url = server.base_url + "/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        status, raw = _post(url, body)
        answer = json.loads(raw)
        assert status == 200 and answer["model"] == "m" and answer["choices"][0]["finish_reason"] == "tool_calls"
        call = answer["choices"][0]["message"]["tool_calls"][0]
        assert call["id"] == "c1" and json.loads(call["function"]["arguments"]) == {"key": "k"}
        assert _post(url, body) == (503, b'{"error": {"message": "busy"}}')
        assert _post(url, body) == (200, b"garbage")
        assert json.loads(_post(url, body)[1])["choices"][0]["message"] == {"role": "assistant", "content": "bye"}
        status, raw = _post(url, body, key="wrong")
        assert status == 401 and b"invalid api key" in raw
        assert len(server.requests) == 5 and server.requests[0] == body
        assert server.auth_headers[-1] == "Bearer wrong"
        assert server.env("x")["OPENAI_BASE_URL"] == server.base_url and server.env("x")["AGENTCOMPASS_MODEL"] == "x"
        assert _post(server.base_url + "/nope", body)[0] == 404


def test_loopback_openai_defaults_to_the_mock_policy_and_streams():
    tools = [{"type": "function", "function": {"name": "get_user", "parameters": {
        "type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}}}]
    with LoopbackOpenAI(api_key=None) as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "get user user_3"}], "tools": tools,
                "stream": True}
        status, raw = _post(server.base_url + "/chat/completions", body, key=None)
    assert status == 200
    events = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]
    delta = events[0]["choices"][0]["delta"]
    assert json.loads(delta["tool_calls"][0]["function"]["arguments"]) == {"user_id": "user_3"}
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls" and raw.endswith(b"data: [DONE]\n\n")


async def test_loopback_openai_in_async_code_with_a_blocking_responder(agentcompass_openai):
    def slow(body):
        time.sleep(0.3)
        return text(body["messages"][-1]["content"].upper())

    agentcompass_openai.responder = slow
    url = agentcompass_openai.base_url + "/chat/completions"
    started = time.monotonic()
    answers = await asyncio.gather(*(
        asyncio.to_thread(_post, url, {"messages": [{"role": "user", "content": f"m{i}"}]}) for i in range(4)))
    assert time.monotonic() - started < 1.0  # answered concurrently
    assert sorted(json.loads(raw)["choices"][0]["message"]["content"] for _, raw in answers) == [
        "M0", "M1", "M2", "M3"]


# -- the pytest plugin ------------------------------------------------------------------------------------


def test_the_pytest_plugin_is_an_entry_point_of_the_core():
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="pytest11") if ep.name == "agentcompass"]
    assert [ep.value for ep in eps] == ["agentcompass.testing.pytest_plugin"]
    assert eps[0].dist is not None and eps[0].dist.name == "agentcompass-core"
    out = subprocess.run([sys.executable, "-c", "import sys, agentcompass.testing; print('pytest' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # the kit itself never imports pytest


def test_fixtures_are_listed(pytester: pytest.Pytester):
    pytester.makepyfile("def test_nothing(): pass\n")
    result = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider")
    for name in ("agentcompass_host", "agentcompass_register", "agentcompass_run", "agentcompass_session",
                 "agentcompass_openai"):
        result.stdout.fnmatch_lines([f"{name} -- *agentcompass*testing*pytest_plugin.py*"])


def test_a_plugin_authors_suite_uses_the_fixtures(pytester: pytest.Pytester):
    """A third-party plugin's tests with nothing but the installed kit: the README's "Testing a plugin" file,
    verbatim, against the README's squares plugin (registered by overriding ``agentcompass_host``, as if its
    entry point were installed)."""
    plugin = (ROOT / "tests" / "helpers" / "squares_plugin.py").read_text()  # the README's plugin module
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Testing a plugin"):]
    test_file = section[section.index("```python\n") + len("```python\n"):section.index("```\n\n")]
    pytester.makepyfile(agentcompass_squares=plugin, test_squares=test_file)
    pytester.makeconftest(textwrap.dedent("""
        import pytest
        from agentcompass.plugins import load_plugins

        import agentcompass_squares


        @pytest.fixture
        def agentcompass_host():
            host = load_plugins()
            assert host.add_plugin(agentcompass_squares, "squares").error is None
            return host
    """))
    pytester.makepyfile(test_session=textwrap.dedent("""
        import pytest

        @pytest.mark.asyncio
        async def test_session(agentcompass_session, agentcompass_openai):
            await agentcompass_session.write_text("x.txt", "1")
            assert (await agentcompass_session.exec(["cat", "x.txt"])).stdout == "1"
            assert agentcompass_openai.base_url.startswith("http://127.0.0.1:")
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "asyncio_mode=strict",
                                          "-o", "asyncio_default_fixture_loop_scope=function")
    result.assert_outcomes(passed=4)
