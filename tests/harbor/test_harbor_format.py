"""Reading Harbor task directories: ``task.toml`` (fields, defaults and legacy spellings as Harbor 0.25 has
them), rewards, ``${VAR}`` templates, the local path mapping, and what a task's environment spec becomes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime import RunRequest, TaskStatus
from agentcompass.testing import run_benchmark
from agentcompass_harbor.benchmark import HarborBenchmark
from agentcompass_harbor.config import HarborFormatError, dockerfile_workdir, find_task_dirs, parse_config
from agentcompass_harbor.layout import CONTAINER, WORKDIR, Layout
from agentcompass_harbor.rewards import RewardError, parse_reward_json, parse_reward_txt
from agentcompass_harbor.scripts import parse_report
from agentcompass_harbor.templates import TemplateError, resolve

from tests.harbor.taskdirs import write_task

REQUEST = RunRequest(benchmark="harbor", harness="nop", model="mock")

#: The example of Harbor's task documentation (tasks/index.mdx), plus the newer fields.
DOCS_EXAMPLE = """
schema_version = "1.1"
artifacts = ["/app/report.txt", { source = "/app/out", destination = "out", exclude = ["*.tmp"] }]

[task]
name = "acme/hello"
description = "A short description of the task"
authors = [{ name = "Steve Jobs", email = "steve@apple.com" }]
keywords = ["trivial", "programming"]

[metadata]
difficulty_explanation = "Trivial task for demonstration"
category = "programming"
difficulty = "easy"

[verifier]
timeout_sec = 120.0
env = { API_KEY = "sk-test-123" }
user = "root"

[agent]
timeout_sec = 90.0
user = "agent"

[solution]
env = { API_KEY = "sk-test-123" }

[environment]
build_timeout_sec = 900.0
docker_image = "some-org/some-name:some-tag"
cpus = 2
memory_mb = 4096
storage_mb = 10240
gpus = 0
gpu_types = ["H100", "A100"]
allow_internet = true
workdir = "/srv/task"
env = { SOME_ENV_VAR = "${SOME_ENV_VAR:-x}" }

[environment.healthcheck]
command = "test -f /ready"
retries = 5

[[environment.mcp_servers]]
name = "mcp-server"
transport = "streamable-http"
url = "http://mcp-server:8000/mcp"
"""


def toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "task.toml"
    path.write_text(text)
    return path


def test_the_documented_fields(tmp_path: Path) -> None:
    config = parse_config(toml(tmp_path, DOCS_EXAMPLE))
    assert config.schema_version == "1.1" and config.name == "acme/hello"
    assert config.metadata["difficulty"] == "easy" and config.metadata["category"] == "programming"
    assert (config.agent_timeout_sec, config.agent_user) == (90.0, "agent")
    assert (config.verifier_timeout_sec, config.verifier_user, config.verifier_mode) == (120.0, "root", "shared")
    assert config.verifier_env == {"API_KEY": "sk-test-123"} and config.solution_env == config.verifier_env
    assert (config.build_timeout_sec, config.docker_image) == (900.0, "some-org/some-name:some-tag")
    assert (config.cpus, config.memory_mb, config.storage_mb, config.gpus) == (2.0, 4096, 10240, 0)
    assert config.network_mode == "public" and config.workdir == "/srv/task"
    assert config.env == {"SOME_ENV_VAR": "${SOME_ENV_VAR:-x}"}
    assert config.healthcheck is not None and config.healthcheck.retries == 5
    assert [a.source for a in config.artifacts] == ["/app/report.txt", "/app/out"]
    assert config.artifacts[1].exclude == ("*.tmp",)


def test_defaults_and_legacy_spellings(tmp_path: Path) -> None:
    config = parse_config(toml(tmp_path, ""))
    assert (config.agent_timeout_sec, config.verifier_timeout_sec, config.build_timeout_sec) == (None, 600.0, 600.0)
    assert config.network_mode == "public" and config.verifier_mode == "shared" and config.os == "linux"
    legacy = parse_config(toml(tmp_path, 'version = "1.0"\n[environment]\nmemory = "2G"\nstorage = "512M"\n'
                                         "allow_internet = false\n"))
    assert (legacy.schema_version, legacy.memory_mb, legacy.storage_mb) == ("1.0", 2048, 512)
    assert legacy.network_mode == "no-network"
    separate = parse_config(toml(tmp_path, '[verifier.environment]\ndocker_image = "x"\n'))
    assert separate.verifier_mode == "separate" and separate.verifier_environment


@pytest.mark.parametrize(("text", "match"), [
    ('[agent]\ntimeout_sec = "soon"', "agent.timeout_sec must be a positive number"),
    ("[verifier]\ntimeout_sec = -1", "verifier.timeout_sec must be a positive number"),
    ('[environment]\nnetwork_mode = "sometimes"', "network_mode must be one of"),
    ('[environment]\nworkdir = "app"', "must be an absolute path"),
    ('[environment]\nmemory = "lots"', "a size like"),
    ('[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ncpus = 1', "incompatible"),
    ('artifacts = ["../etc/passwd"]', "contains '..'"),
    ("[environment]\ncpus = true", "positive number"),
    ("this is not toml", "not valid TOML"),
])
def test_invalid_values_name_the_file_and_key(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(HarborFormatError, match=match) as caught:
        parse_config(toml(tmp_path, text))
    assert str(tmp_path) in str(caught.value)


def test_dockerfile_workdir(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    cases = {
        "FROM x\nWORKDIR /app\n": "/app",
        "FROM x\nWORKDIR /app\nWORKDIR src\n": "/app/src",
        "FROM x AS build\nWORKDIR /build\nFROM y\nRUN true\n": None,  # the final stage sets none
        "FROM x\nworkdir /opt/task/\n": "/opt/task",
        "FROM x\nARG D=/a\nWORKDIR $D\n": None,
    }
    for text, expected in cases.items():
        dockerfile.write_text(text)
        assert dockerfile_workdir(dockerfile) == expected, text


def test_find_task_dirs(tmp_path: Path) -> None:
    for name in ("b", "a", "org/c"):
        write_task(tmp_path, name, instruction="x", test="true\n")
    (tmp_path / "notes").mkdir()
    assert [t for t, _ in find_task_dirs(tmp_path)] == ["a", "b", "org/c"]
    assert find_task_dirs(tmp_path / "a") == [("a", tmp_path / "a")]


@pytest.mark.parametrize(("text", "expected"), [("1", 1.0), (" 0.5\n", 0.5), ("1e0", 1.0), ("-2", -2.0)])
def test_reward_txt(text: str, expected: float) -> None:
    assert parse_reward_txt(text) == {"reward": expected}


@pytest.mark.parametrize(("text", "match"), [
    ("", "empty"), ("  \n", "empty"), ("one", "does not hold a number"), ("nan", "not a finite"),
    ("inf", "not a finite"), ("1e999", "not a finite"), ("1 2", "does not hold a number"),
])
def test_invalid_reward_txt(text: str, match: str) -> None:
    with pytest.raises(RewardError, match=match):
        parse_reward_txt(text)


def test_reward_json() -> None:
    assert parse_reward_json('{"reward": 1, "accuracy": 0.5}') == {"reward": 1.0, "accuracy": 0.5}
    assert parse_reward_json('{"accuracy": 0.25}') == {"accuracy": 0.25, "reward": 0.25}  # the only key


@pytest.mark.parametrize(("text", "match"), [
    ("", "empty"), ("[1]", "JSON object"), ("{}", "JSON object"), ("1", "JSON object"),
    ('{"reward": true}', "not a number"), ('{"reward": "1"}', "not a number"),
    ('{"reward": NaN}', "not a finite"), ('{"reward": Infinity}', "not a finite"),
    ('{"reward": 1e999}', "not a finite"), ('{"reward": {"a": 1}}', "not a number"),
    ('{"a": 1, "b": 2}', "no 'reward' key"), ("{not json", "not valid JSON"),
])
def test_invalid_reward_json(text: str, match: str) -> None:
    with pytest.raises(RewardError, match=match):
        parse_reward_json(text)


def test_templates() -> None:
    host = {"KEY": "v", "OTHER": "o"}
    assert resolve({"A": "${KEY}", "B": "x-${MISSING:-d}", "C": "plain"}, allowed={"KEY"}, host=host, where="w") \
        == {"A": "v", "B": "x-d", "C": "plain"}
    assert resolve({"A": "${OTHER:-fallback}"}, allowed=(), host=host, where="w") == {"A": "fallback"}
    with pytest.raises(TemplateError, match="pass_env=OTHER"):
        resolve({"A": "${OTHER}"}, allowed=(), host=host, where="w")
    with pytest.raises(TemplateError, match="not set"):
        resolve({"A": "${GONE}"}, allowed={"GONE"}, host=host, where="w")


def test_the_local_layout_rewrites_only_harbor_paths() -> None:
    layout = Layout(WORKDIR, "/tmp/w", "/app")
    assert layout.rewrite("echo 1 > /logs/verifier/reward.txt") == "echo 1 > /tmp/w/.harbor/logs/verifier/reward.txt"
    assert layout.rewrite("cd /app && cat /app/x '/tests/t.py' /solution") == \
        "cd /tmp/w && cat /tmp/w/x '/tmp/w/.harbor/tests/t.py' /tmp/w/.harbor/solution"
    for untouched in ("/application/x", "http://host/app/x", "$HOME/logs", "./tests/x", "/var/logs", "a/app"):
        assert layout.rewrite(untouched) == untouched
    assert layout.place("out.txt") == "/tmp/w/out.txt" and layout.place("/logs/artifacts") == \
        "/tmp/w/.harbor/logs/artifacts"
    container = Layout(CONTAINER, "/app", "/app")
    assert container.rewrite("/logs/x") == "/logs/x" and container.verifier_dir == "/logs/verifier"


def test_the_verification_report() -> None:
    import base64

    stderr = ("setup note\n@@agentcompass-harbor file reward.txt\n" + base64.b64encode(b"1\n").decode() +
              "\n@@agentcompass-harbor other\n@@agentcompass-harbor end\n")
    report = parse_report(stderr)
    assert report.complete and report.others and report.files == {"reward.txt": b"1\n"}
    assert report.stderr == "setup note"
    assert not parse_report("no report at all").complete
    assert not parse_report("@@agentcompass-harbor file reward.txt\nAAA").complete  # cut off


def spec_of(tmp_path: Path, toml_text: str, dockerfile: str | None = "FROM python:3.11-slim\nWORKDIR /srv\n",
            **options: str):  # type: ignore[no-untyped-def]
    write_task(tmp_path / "t", "task", instruction="x", test="true\n", toml=toml_text, dockerfile=dockerfile)
    bench = HarborBenchmark(path=str(tmp_path / "t"), **options)
    task = next(iter(bench.load_tasks(REQUEST)))
    return bench.environment_spec(task, replace(REQUEST, environment="docker")), task


def test_the_environment_spec(tmp_path: Path) -> None:
    spec, task = spec_of(tmp_path, '[environment]\ncpus = 2\nmemory_mb = 4096\nnetwork_mode = "no-network"\n'
                                   '[agent]\nuser = "agent"\ntimeout_sec = 30\n')
    assert spec.build_context == str((tmp_path / "t" / "task" / "environment").resolve())
    assert (spec.cpus, spec.memory, spec.network, spec.user, spec.workdir) == (2.0, "4096m", False, "agent", "/srv")
    assert task.data["agent_timeout_sec"] == 30.0 and task.data["instruction"] == "x\n"
    # a prebuilt image: built from the Dockerfile unless -b image=prebuilt
    toml_text = '[environment]\ndocker_image = "org/img:1"\nworkdir = "/w"\n'
    spec, _ = spec_of(tmp_path / "a", toml_text)
    assert spec.build_context and spec.workdir == "/w" and spec.network is True
    spec, _ = spec_of(tmp_path / "b", toml_text, image="prebuilt")
    assert (spec.image, spec.build_context) == ("org/img:1", None)
    spec, _ = spec_of(tmp_path / "c", "", dockerfile=None)  # neither: the default image and workdir
    assert (spec.image, spec.build_context, spec.workdir) == ("python:3.11-slim", None, "/app")
    spec, _ = spec_of(tmp_path / "d", '[environment]\nnetwork_mode = "no-network"\n', network="on")
    assert spec.network is True


def test_unsupported_fields_are_recorded(tmp_path: Path) -> None:
    _, task = spec_of(tmp_path, '[metadata]\ncreated = 2025-10-31\n[environment]\ngpus = 1\n'
                                'network_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n')
    unsupported = task.metadata["harbor"]["unsupported"]
    # honoured: a device request (test_harbor_resources.py), an egress proxy (test_harbor_network.py)
    assert not any("gpus" in u or "allowlist" in u for u in unsupported)
    assert task.metadata["harbor"]["metadata"] == {"created": "2025-10-31"}  # a TOML date, as JSON


@pytest.mark.parametrize(("options", "match"), [
    ({}, "needs -b dataset=NAME.*or -b path=DIR"), ({"path": "/no/such/dir"}, "no such directory"), ({"path": ".", "bogus": "1"}, "bogus"),
    ({"path": ".", "verify": "sometimes"}, "verify"), ({"path": ".", "workdir": "rel"}, "absolute"),
])
def test_bad_options(options: dict[str, str], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        HarborBenchmark(**options)


def test_invalid_task_directories_are_listed(tmp_path: Path) -> None:
    write_task(tmp_path, "good", instruction="x", test="true\n")
    write_task(tmp_path, "no-test", instruction="x", test="true\n")
    (tmp_path / "no-test" / "tests" / "test.sh").unlink()
    write_task(tmp_path, "steps", instruction="x", test="true\n", toml='[[steps]]\nname = "one"\n')
    write_task(tmp_path, "windows", instruction="x", test="true\n", toml='[environment]\nos = "windows"\n')
    write_task(tmp_path, "no-instruction", instruction="x", test="true\n")
    (tmp_path / "no-instruction" / "instruction.md").unlink()
    with pytest.raises(UsageError, match="4 invalid task") as caught:
        HarborBenchmark(path=str(tmp_path))
    for piece in ("no tests/test.sh", "steps/one: no instruction.md", "only linux", "no instruction.md"):
        assert piece in str(caught.value)
    with pytest.raises(UsageError, match="no task directory"):
        HarborBenchmark(path=str(tmp_path / "good" / "tests"))


async def test_the_healthcheck(tmp_path: Path) -> None:
    write_task(tmp_path / "t", "never-ready", instruction="x", test="echo 1 > /logs/verifier/reward.txt\n",
               toml="[environment.healthcheck]\ncommand = 'echo not yet >&2; false'\nretries = 2\n"
                    "interval_sec = 0.1\n")
    write_task(tmp_path / "t", "ready-later", instruction="x", test="echo 1 > /logs/verifier/reward.txt\n",
               toml="[environment.healthcheck]\ncommand = 'test -f ready || { touch ready; false; }'\n"
                    "retries = 2\ninterval_sec = 0.1\n")
    run = await run_benchmark("harbor", "nop", benchmark_args={"path": str(tmp_path / "t")}, run_dir=tmp_path / "r")
    failed = run.result("never-ready")
    assert failed.status is TaskStatus.PREPARE_ERROR and "healthcheck failed 2 times: not yet" in failed.error
    assert run.result("ready-later").metrics == {"reward": 1.0}
