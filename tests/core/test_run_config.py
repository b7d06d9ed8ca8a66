"""Run config files (issue 26, item 1): the options of ``run`` by name, checked with errors naming the key and
the file; the command line overriding the file; a run's ``run.json`` run again exactly."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from agentcompass.cli.run import RUN_OPTIONS, run_command
from agentcompass.errors import UsageError
from agentcompass.run_config import (
    OPTION_KEYS,
    RunConfigError,
    RunOptions,
    load_run_config,
    option_flag,
    plugin_version_changes,
)
from agentcompass.runtime.types import RoleModelSettings, RunRequest
from agentcompass.serialization import unstructure
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers.cli_processes import read_jsonl, run_cli_subprocess

FULL = """
benchmark = "example_interactive"
harness = "none"
model = "mock"
user_model = "mock"
env = "local"
env_args = { memory = "4g" }
benchmark_args = { split = "test", ids = ["a", "b"], n = 3 }
harness_args = { max_turns = 5 }
model_args = { temperature = 0.2, stop = ["x"] }
model_aliases = { "claude-haiku" = "agent" }
executor = "local"
executor_args = {}
gateway_host = "127.0.0.1"
trials = 2
seed = 11
concurrency = 3
max_environments = 2
limit = 4
task_ids = ["t1", "t2"]
retries = 1
timeout = 60
phase_timeouts = { run = 30, prepare = 10.5 }
model_base_url = "http://127.0.0.1:9/v1"
model_api_key_env = "AGENT_KEY"
max_retries = 0
max_connections = 4
request_timeout = 30
max_tokens_per_task = 1000
max_cost = 2.5
secret_env = ["MY_TOKEN"]

[models.agent]
max_connections = 2

[models.user]
base_url = "http://127.0.0.1:10/v1"
api_key_env = "USER_KEY"
args = { temperature = 0 }
max_connections = 1

[models.judge]
model = "openai/gpt-4o-mini"
"""


def write(tmp_path: Path, text: str, name: str = "run.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_option_of_run_has_a_key_and_every_key_an_option():
    params = {p.name for p in run_command.params}
    cli_only = {"output", "resume", "config_path", "rerun", "as_json", "task_lines", "otel", "scan"}
    assert {*OPTION_KEYS, "user_model", "judge_model"} == params - cli_only
    for key, short, _ in RUN_OPTIONS:
        flags = next(p.opts for p in run_command.params if p.name == key)
        assert flags[0] == option_flag(key) and set(short) <= set(flags)


def test_a_file_with_every_key_becomes_the_request(tmp_path):
    req = load_run_config(write(tmp_path, FULL)).options.request()
    assert (req.benchmark, req.harness, req.model, req.environment) == ("example_interactive", "none", "mock", "local")
    assert req.models.roles == {"user": "mock", "judge": "openai/gpt-4o-mini"}
    assert req.benchmark_args == {"split": "test", "ids": "a,b", "n": "3"}  # as -b ids=a -b ids=b -b n=3 give them
    assert req.model_args == {"temperature": "0.2", "stop": '["x"]'}  # JSON, as --model-arg values are read
    assert req.harness_args == {"max_turns": "5"} and req.environment_args == {"memory": "4g"}
    assert req.schedule.phase_timeouts == {"run": 30.0, "prepare": 10.5} and req.schedule.timeout == 60.0
    assert req.tasks.task_ids == ("t1", "t2") and req.models.secret_env == ("MY_TOKEN",)
    assert (req.tasks.trials, req.tasks.seed, req.schedule.concurrency, req.schedule.max_environments, req.tasks.limit) == (2, 11, 3, 2, 4)
    assert (req.models.base_url, req.models.api_key_env, req.models.max_connections) == ("http://127.0.0.1:9/v1",
                                                                                 "AGENT_KEY", 4)
    assert req.models.role_settings == {
        "agent": RoleModelSettings(max_connections=2),
        "user": RoleModelSettings(base_url="http://127.0.0.1:10/v1", api_key_env="USER_KEY",
                                  args={"temperature": "0"}, max_connections=1),
    }


def test_models_agent_is_the_same_setting_as_the_flat_options(tmp_path):
    req = load_run_config(write(tmp_path, """
[models.agent]
model = "openai-compatible/m"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "K"
args = { temperature = 0 }
[models.user]
model = "mock"
""")).options.request()
    assert (req.model, req.models.base_url, req.models.api_key_env) == ("openai-compatible/m", "http://127.0.0.1:9/v1",
                                                                      "K")
    assert req.model_args == {"temperature": "0"} and req.models.roles == {"user": "mock"} and not req.models.role_settings
    same = load_run_config(write(tmp_path, 'model = "mock"\n[models.agent]\nmodel = "mock"\n')).options
    assert same.request().model == "mock"


@pytest.mark.parametrize(("text", "message"), [
    ('concurrency = "4"', "run.toml: concurrency must be an integer, not a string"),
    ("concurrncy = 4", "run.toml: unknown key 'concurrncy' (did you mean 'concurrency'?)"),
    ("concurrency = 0", "run.toml: concurrency must be at least 1"),
    ("trials = true", "run.toml: trials must be an integer, not a boolean"),
    ("limit = 0", "run.toml: limit must be at least 1"),
    ("timeout = -1", "run.toml: timeout"),
    ("phase_timeouts = { bogus = 3 }", "run.toml: unknown phase(s) bogus in phase_timeouts"),
    ('task_ids = "t1"', "run.toml: task_ids must be a list of strings, not a string"),
    ("benchmark_args = { a = { b = 1 } }", "run.toml: benchmark_args.a must be a string, number"),
    ('output = "x"', "run.toml: 'output' is not a run config key: give --output on the command line"),
    ('model = "a"\n[models.agent]\nmodel = "b"', "run.toml: model and models.agent.model are the same setting"),
    ('user_model = "a"\n[models.user]\nmodel = "b"', "run.toml: user_model and models.user.model are the same"),
    ('[models.critic]\nmodel = "mock"', "run.toml: unknown model role 'critic' in [models]"),
    ('[models.user]\napi_key = "x"', "run.toml: unknown key 'models.user.api_key'"),
    ("[models.user]\nmax_connections = 0", "run.toml: models.user.max_connections must be at least 1"),
    ("models = 3", "run.toml: models must be a table of roles"),
    ("benchmark = ", "run.toml is not valid TOML"),
])
def test_bad_files_are_usage_errors_naming_file_and_key(tmp_path, text, message):
    with pytest.raises(RunConfigError) as caught:
        load_run_config(write(tmp_path, text))
    assert str(caught.value).startswith(str(tmp_path / "run.toml")) and message.split("run.toml", 1)[1] in str(
        caught.value)


def test_a_key_pasted_where_its_variable_name_goes_is_refused_and_never_shown(tmp_path):
    secret = "sk-live-abcdef0123456789"
    for text in (f'model_api_key_env = "{secret}"', f'[models.judge]\napi_key_env = "{secret}"',
                 f'secret_env = ["{secret}"]'):
        with pytest.raises(RunConfigError, match="must name an environment variable") as caught:
            load_run_config(write(tmp_path, text))
        assert secret not in str(caught.value)


def test_later_layers_win_and_tables_merge_by_key(tmp_path):
    base = RunOptions.parse({"concurrency": 4, "benchmark_args": {"a": "1", "b": "2"},
                             "models": {"user": {"base_url": "http://x/v1", "args": {"t": 0}}}}, "defaults")
    over = RunOptions.parse({"concurrency": 8, "benchmark_args": {"b": "3"},
                             "models": {"user": {"args": {"k": 1}}}}, "cell")
    req = (base | over).request()
    assert req.schedule.concurrency == 8 and req.benchmark_args == {"a": "1", "b": "3"}
    assert req.models.role_settings["user"] == RoleModelSettings(base_url="http://x/v1", args={"t": "0", "k": "1"})
    assert (base | over).given_fields() == {"concurrency", "benchmark_args", "role_settings"}


def test_a_relative_prices_path_is_taken_from_the_files_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "p.json").write_text("{}")  # the file is read when the options are checked
    req = load_run_config(write(tmp_path / "sub", 'prices = "p.json"')).options.request()
    assert req.models.prices == str(tmp_path / "sub" / "p.json")


names = st.text(st.sampled_from("abcxyz_"), min_size=1, max_size=6)
strings = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.fixed_dictionaries({}, optional={
    "concurrency": st.integers(1, 64), "trials": st.integers(1, 5), "seed": st.integers(0, 2**31 - 1),
    "limit": st.integers(1, 9), "timeout": st.floats(1, 1e4), "max_cost": st.floats(0.01, 100),
    "benchmark_args": st.dictionaries(names, strings, max_size=3), "model_args": st.dictionaries(names, strings),
    "task_ids": st.lists(strings, max_size=3), "phase_timeouts": st.dictionaries(
        st.sampled_from(["run", "prepare", "evaluate"]), st.floats(0.5, 100)),
    "user_model": st.sampled_from(["mock", "openai/x"]), "model_base_url": st.just("http://127.0.0.1:1/v1"),
    "models": st.fixed_dictionaries({"user": st.fixed_dictionaries({}, optional={
        "base_url": st.just("http://127.0.0.1:2/v1"), "api_key_env": st.sampled_from(["A", "B_KEY"]),
        "args": st.dictionaries(names, strings, max_size=2), "max_connections": st.integers(1, 9)})}),
}))
@example(data={"models": {"user": {"args": {}}}})  # a role table that sets nothing (found by hypothesis)
def test_a_request_round_trips_through_options_and_run_json(data):
    req = RunOptions.parse({"benchmark": "b", "harness": "h", "model": "mock", **data}, "x").request()
    assert RunOptions.from_request(req).request() == req
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.json"
        path.write_text(json.dumps({"request": unstructure(req), "plugins": {}}))
        assert load_run_config(path).options.request() == req


def test_plugin_version_changes_are_named():
    assert plugin_version_changes({"a": "1.0", "b": "2", "c": None}, {"a": "1.1", "b": "2", "c": None}) == [
        "a 1.0 -> 1.1"]
    assert plugin_version_changes({"x": "1"}, {}) == ["x 1 -> not installed"]


# -- through the CLI --------------------------------------------------------------------------------------------


def request_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())["request"]


def test_the_command_line_overrides_the_file_even_with_a_default_value(tmp_path):
    config = write(tmp_path, 'benchmark = "example_interactive"\nharness = "none"\nmodel = "mock"\nlimit = 2\n'
                             "concurrency = 2\nseed = 5\nbenchmark_args = { max_turns = 30 }\n")
    out = tmp_path / "r"
    done = run_cli_subprocess("run", "--config", str(config), "--concurrency", "8", "-n", "1", "-o", str(out),
                              testing=False)
    assert done.returncode == 0, done.stderr
    req = request_of(out)
    assert (req["concurrency"], req["limit"], req["seed"]) == (8, 1, 5)  # 8 is the default, and still wins
    assert req["benchmark_args"] == {"max_turns": "30"}


@pytest.mark.parametrize(("args", "message"), [
    (["--config", "{tmp}/missing.toml"], "{tmp}/missing.toml: no such file"),
    (["--config", "{tmp}/bad.toml"], "{tmp}/bad.toml: unknown key 'modle' (did you mean 'model'?)"),
    (["--config", "{tmp}/bad.toml", "--rerun", "{tmp}"], "give --config FILE or --rerun RUN_DIR, not both"),
    (["--rerun", "{tmp}"], "is a directory without a run.json"),
    (["--phase-timeout", "run=abc", "example_interactive", "none", "mock"], "Error: --phase-timeout run must be a number of seconds"),
])
def test_bad_config_input_is_a_clear_cli_error(tmp_path, args, message):
    write(tmp_path, 'modle = "mock"', "bad.toml")
    done = run_cli_subprocess("run", *[a.format(tmp=tmp_path) for a in args], testing=False)
    assert done.returncode == 2, done.stderr
    assert message.format(tmp=tmp_path) in done.stderr and "Traceback" not in done.stderr


def test_rerun_runs_the_same_options_and_seed_again_into_a_new_directory(tmp_path):
    first, again, via_json = tmp_path / "first", tmp_path / "again", tmp_path / "via-json"
    done = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "n=5", "-m", "error_rate=0.5", "--trials",
                              "2", "-o", str(first))
    assert done.returncode in (0, 1), done.stderr
    done = run_cli_subprocess("run", "--rerun", str(first), "-o", str(again))
    assert done.returncode in (0, 1), done.stderr
    done = run_cli_subprocess("run", "--config", str(first / "run.json"), "-o", str(via_json))
    assert done.returncode in (0, 1), done.stderr

    def results(run_dir: Path) -> dict:
        return {(r["task_id"], r["trial"]): (r["status"], r["metrics"], r["seed"])
                for r in read_jsonl(run_dir / "results.jsonl")}

    original = results(first)
    # the seeded scripted tasks pass or fail by their seed: a different seed would give other scores
    assert len(original) == 10 and len({json.dumps(m) for _, m, _ in original.values()}) > 1
    assert results(again) == original and results(via_json) == original
    old, new = request_of(first), request_of(again)
    assert new["run_id"] != old["run_id"]
    assert {**new, "run_id": ""} == {**old, "run_id": ""}


def test_rerun_warns_when_a_plugin_version_differs(tmp_path):
    first = tmp_path / "first"
    done = run_cli_subprocess("run", "example_interactive", "none", "mock", "-n", "1", "-o", str(first),
                              testing=False)
    assert done.returncode == 0, done.stderr
    info = json.loads((first / "run.json").read_text())
    info["plugins"]["example_interactive"] = "0.0.1"
    (first / "run.json").write_text(json.dumps(info))
    done = run_cli_subprocess("run", "--rerun", str(first), "-o", str(tmp_path / "again"), testing=False)
    assert done.returncode == 0, done.stderr
    assert "warning: the plugins differ" in done.stderr and "example_interactive 0.0.1 -> 0.1.0" in done.stderr


def test_the_request_type_has_no_field_without_an_option_or_key():
    from dataclasses import fields

    from agentcompass.runtime.types import REQUEST_GROUPS, REQUEST_OPTIONS

    inner = {"run_id", "role_models", "role_settings"}
    assert set(OPTION_KEYS.values()) | inner == set(REQUEST_OPTIONS)
    leaves = {(None, f.name) for f in fields(RunRequest) if f.name not in REQUEST_GROUPS}
    leaves |= {(group, f.name) for group, kind in REQUEST_GROUPS.items() for f in fields(kind)}
    assert set(REQUEST_OPTIONS.values()) == leaves  # every field of the request and its groups has an option


# -- role settings reach each role's provider ---------------------------------------------------------------------


def test_a_role_gets_its_own_settings_and_never_the_agents_key_for_another_server():
    from agentcompass.runtime.model_providers import settings_from_request

    req = RunOptions.parse({"model": "openai-compatible/a", "model_base_url": "http://127.0.0.1:1/v1",
                            "model_api_key_env": "AGENT_KEY", "max_connections": 9,
                            "models": {"user": {"base_url": "http://127.0.0.1:2/v1", "max_connections": 3},
                                       "agent": {"max_connections": 5}}}, "x").request()
    agent = settings_from_request(req, role="agent")
    assert (agent.base_url, agent.api_key_env, agent.max_connections) == ("http://127.0.0.1:1/v1", "AGENT_KEY", 5)
    user = settings_from_request(req, role="user")  # its own server: the agent's key variable is not used there
    assert (user.base_url, user.api_key_env, user.max_connections) == ("http://127.0.0.1:2/v1", None, 3)
    judge = settings_from_request(req, role="judge")  # nothing of its own, same provider: the agent's connection
    assert (judge.base_url, judge.api_key_env, judge.max_connections) == ("http://127.0.0.1:1/v1", "AGENT_KEY", 9)
    other = settings_from_request(req, role="judge", for_agent_provider=False)
    assert (other.base_url, other.api_key_env) == (None, None)


def test_build_clients_gives_each_role_its_settings_and_options(monkeypatch):
    from agentcompass.models.roles import build_clients
    from agentcompass.plugins import load_plugins

    monkeypatch.setenv("USER_KEY", "user-key-0123456789")
    host = load_plugins()
    req = RunOptions.parse({"model": "openai-compatible/a", "model_base_url": "http://127.0.0.1:1/v1",
                            "user_model": "openai-compatible/a", "judge_model": "openai-compatible/a",
                            "models": {"user": {"base_url": "http://127.0.0.1:2/v1", "api_key_env": "USER_KEY",
                                                "args": {"top_p": 0.5}}}}, "x").request()
    clients = build_clients(host, req)
    assert clients["agent"] is clients["judge"]  # same model, settings and options: one client
    assert clients["user"] is not clients["agent"]
    assert clients["user"].base_url == "http://127.0.0.1:2/v1" and clients["user"].params == {"top_p": 0.5}
    assert clients["agent"].base_url == "http://127.0.0.1:1/v1" and clients["agent"].params == {}
    missing = RunOptions.parse({"model": "mock", "user_model": "openai-compatible/u"}, "x").request()
    with pytest.raises(UsageError, match=r"for the user role: give it its own .*\[models.user\]"):
        build_clients(host, missing)


def test_credentials_in_a_roles_base_url_are_masked_in_run_json(tmp_path):
    password = "pw-0123456789abcdefXYZ"
    config = write(tmp_path, f'''benchmark = "example_interactive"
harness = "none"
model = "mock"
limit = 1
[models.user]
model = "openai-compatible/u"
base_url = "http://me:{password}@127.0.0.1:9/v1"
''')
    out = tmp_path / "r"
    done = run_cli_subprocess("run", "--config", str(config), "-o", str(out), testing=False)
    assert done.returncode == 0, done.stderr
    assert password not in done.stderr + done.stdout
    for path in out.rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
    assert "127.0.0.1:9/v1" in request_of(out)["role_settings"]["user"]["base_url"]


def test_the_readmes_example_is_a_valid_run_config(tmp_path):
    from tests.helpers.cli_processes import ROOT

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Run config files", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    req = load_run_config(write(tmp_path, example)).options.request()
    assert (req.benchmark, req.model, req.models.roles["user"]) == ("taubench", "openai-compatible/Qwen3-8B",
                                                                   "openai/gpt-4o-mini")
    assert req.models.role_settings["user"] == RoleModelSettings(api_key_env="OPENAI_API_KEY", max_connections=8)


def test_a_resume_may_change_a_roles_connection_but_not_its_options(tmp_path):
    first = write(tmp_path, '''benchmark = "example_interactive"
harness = "none"
model = "mock"
limit = 1
[models.user]
model = "openai-compatible/u"
base_url = "http://127.0.0.1:9/v1"
args = { temperature = 0 }
''')
    out = tmp_path / "r"
    done = run_cli_subprocess("run", "--config", str(first), "-o", str(out), testing=False)
    assert done.returncode == 0, done.stderr
    moved = write(tmp_path, '[models.user]\nbase_url = "http://127.0.0.1:10/v1"\nmax_connections = 2\n', "moved.toml")
    done = run_cli_subprocess("run", "--resume", str(out), "--config", str(moved), testing=False)
    assert done.returncode == 0, done.stderr
    assert request_of(out)["role_settings"]["user"] == {"base_url": "http://127.0.0.1:10/v1", "api_key_env": None,
                                                         "args": {"temperature": "0"}, "max_connections": 2}
    hotter = write(tmp_path, "[models.user]\nargs = { temperature = 1 }\n", "hotter.toml")
    done = run_cli_subprocess("run", "--resume", str(out), "--config", str(hotter), testing=False)
    assert done.returncode == 2 and "--resume cannot change [models.ROLE] args" in done.stderr, done.stderr


toml_scalars = st.one_of(st.booleans(), st.integers(-3, 2**40), st.floats(allow_nan=True), strings,
                         st.dates(), st.lists(st.integers(-1, 3), max_size=2))
toml_values = st.recursive(toml_scalars, lambda inner: st.dictionaries(names, inner, max_size=3), max_leaves=6)
any_key = st.sampled_from([*OPTION_KEYS, "user_model", "judge_model", "models", "bogus", "output"])
role_tables = st.dictionaries(st.sampled_from(["agent", "user", "judge", "critic"]), st.one_of(
    toml_scalars, st.dictionaries(st.sampled_from(["model", "base_url", "api_key_env", "args", "max_connections",
                                                   "api_key"]), toml_values, max_size=3)), max_size=2)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(any_key, toml_values, max_size=5), role_tables)
def test_any_input_is_a_request_or_a_run_config_error(data, models):
    if models:
        data = {**data, "models": models}
    try:
        req = RunOptions.parse(data, "f.toml").request()
    except RunConfigError as exc:
        assert str(exc).startswith("f.toml: ")
    else:
        assert isinstance(req, RunRequest)
