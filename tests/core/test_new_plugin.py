"""``agentcompass new benchmark|harness|environment NAME``: a plugin package that installs into a fresh virtual
environment next to agentcompass-core only, shows in ``plugins list``, runs with the ``mock`` model, and whose own
generated test passes there as generated."""

from __future__ import annotations

import ast
import json
import keyword
import os
import shutil
import subprocess
import sys

import pytest
from agentcompass.cli.main import cli
from agentcompass.errors import UsageError
from agentcompass.exit_codes import ExitCode
from agentcompass.scaffold import KINDS, plugin_names, write_plugin
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tests.core.test_public_surface import violations
from tests.helpers.cli_processes import ROOT

NAMES = st.from_regex(r"[a-z][a-z0-9]{0,8}([_-][a-z0-9]{1,6}){0,2}", fullmatch=True)


@given(kind=st.sampled_from(KINDS), name=NAMES)
def test_every_valid_name_gives_importable_names(kind, name):
    names = plugin_names(kind, name)
    assert names.name == name
    assert names.package.isidentifier() and not keyword.iskeyword(names.package)
    assert names.class_name.isidentifier() and names.class_name[0].isupper()
    assert names.distribution.startswith("agentcompass-") and "_" not in names.distribution
    assert names.package == names.distribution.replace("-", "_")


@given(name=st.text(min_size=1, max_size=12).filter(lambda s: s != s.lower() or not s[0].isalpha()
                                                     or any(c in s for c in " /.:!@") or s.endswith(("-", "_"))))
def test_an_invalid_name_is_one_usage_error(name):
    with pytest.raises(UsageError, match="is not valid: use lowercase letters"):
        plugin_names("benchmark", name)


@pytest.mark.parametrize("kind", KINDS)
def test_the_generated_code_imports_only_the_public_api(tmp_path, kind):
    root = write_plugin(kind, f"my_{kind}", tmp_path / "plugins")
    assert violations(tmp_path) == []  # the same check the bundled plugins pass
    for path in root.rglob("*.py"):
        ast.parse(path.read_text(), str(path))
    assert {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} == {
        "pyproject.toml", "README.md", ".gitignore", f"src/agentcompass_my_{kind}/__init__.py",
        f"tests/test_my_{kind}.py"}
    pyproject = (root / "pyproject.toml").read_text()
    assert f'[project.entry-points.agentcompass]\nmy_{kind} = "agentcompass_my_{kind}"' in pyproject


def test_cli_writes_the_package_and_refuses_to_overwrite(tmp_path, agentcompass_host):
    def invoke(*args):
        return CliRunner().invoke(cli, ["new", *args, "--dir", str(tmp_path)], obj={"plugin_host": agentcompass_host})

    first = invoke("harness", "my-agent")
    assert first.exit_code == 0, first.output
    assert (tmp_path / "agentcompass-my-agent" / "src" / "agentcompass_my_agent" / "__init__.py").is_file()
    again = invoke("harness", "my-agent")
    assert again.exit_code == ExitCode.USAGE
    assert again.output.strip().splitlines() == [
        f"Error: {tmp_path / 'agentcompass-my-agent'} already exists: choose another NAME or --dir, or remove it first"]
    bad = invoke("benchmark", "My Bench")
    assert bad.exit_code == ExitCode.USAGE and "Traceback" not in bad.output
    assert "plugin name 'My Bench' is not valid" in bad.output
    kind = invoke("executor", "x")
    assert kind.exit_code == ExitCode.USAGE and "'executor' is not one of 'benchmark', 'harness', 'environment'" in kind.output


def _run(argv, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.slow
def test_generated_plugins_install_list_run_and_pass_their_tests(tmp_path):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    # The generated packages, written by the real command.
    for kind in KINDS:
        _run([sys.executable, "-m", "agentcompass.cli.main", "new", kind, f"my_{kind}", "--dir", str(tmp_path)])
    # One fresh environment for all three, offline: agentcompass-core and its test extra from the workspace's
    # lock file (wheels from uv's cache), then the generated packages (hatchling from the cache too).
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    _run([uv, "sync", "-q", "--offline", "--locked", "--package", "agentcompass-core", "--extra", "testing",
          "--no-default-groups"], cwd=ROOT, env={**env, "UV_PROJECT_ENVIRONMENT": str(venv)})
    python = venv / "bin" / "python"
    packages = [tmp_path / f"agentcompass-my-{kind}" for kind in KINDS]
    _run([uv, "pip", "install", "-q", "--offline", "--python", str(python), *[str(p) for p in packages]], env=env)
    exe = str(venv / "bin" / "agentcompass")
    listed = json.loads(_run([exe, "plugins", "list", "--json"], cwd=tmp_path, env=env).stdout)
    plugins = {p["name"]: p for p in listed}
    assert set(plugins) == {"builtin", "my_benchmark", "my_harness", "my_environment"}
    assert plugins["my_benchmark"]["registers"] == {"benchmark": ["my_benchmark"]}
    assert plugins["my_harness"]["registers"] == {"harness": ["my_harness"]}
    assert plugins["my_environment"]["registers"] == {"environment": ["my_environment"]}
    assert all(p["error"] is None and p["version"] in ("0.1.0", plugins["builtin"]["version"]) for p in listed)
    # The three together with the mock model: the harness's loop calls it, in the generated environment.
    run_env = {**env, "PATH": f"{venv}/bin:{env['PATH']}"}
    together = json.loads(_run([exe, "run", "my_benchmark", "my_harness", "mock", "--env", "my_environment",
                                "--json", "-o", str(tmp_path / "run")], cwd=tmp_path, env=run_env).stdout)
    assert together["status_counts"] == {"COMPLETED": 3}
    calls = [json.loads(line) for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert len(calls) == 3  # one model call per task: the mock answers in text, which ends the loop
    oracle = json.loads(_run([exe, "run", "my_benchmark", "oracle", "mock", "--json", "-o", str(tmp_path / "oracle")],
                             cwd=tmp_path, env=run_env).stdout)
    assert oracle["metrics"]["overall"]["score"]["mean"] == 1.0
    # Each package's own test, as generated, in that environment.
    for package in packages:
        tested = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
                      cwd=package, env=run_env)
        assert " passed" in tested.stdout and "failed" not in tested.stdout, tested.stdout
