"""A third-party plugin written from the spec's snippet, pip-installed into a fresh virtual environment
next to agentcompass-core only, is discovered by `plugins list` and runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap

import pytest

from tests.helpers.cli_processes import ROOT

#: The README's plugin module, installed as the package ``agentcompass_squares``.
PLUGIN_MODULE = (ROOT / "tests" / "helpers" / "squares_plugin.py").read_text()


def test_the_tested_plugin_is_the_readmes_word_for_word():
    readme = (ROOT / "README.md").read_text()
    at = readme.index("```python\n", readme.index("`agentcompass_squares/__init__.py`:")) + len("```python\n")
    code = PLUGIN_MODULE[PLUGIN_MODULE.index('"""', 3) + 4:].lstrip("\n")
    assert readme[at:readme.index("```\n", at)] == code

PYPROJECT = textwrap.dedent('''
    [project]
    name = "agentcompass-squares"
    version = "1.2.3"
    requires-python = ">=3.11"
    dependencies = ["agentcompass-core"]

    [project.entry-points.agentcompass]
    squares = "agentcompass_squares"

    [build-system]
    requires = ["hatchling"]
    build-backend = "hatchling.build"
''')


# A second distribution: an executor wrapping the local one, observers with pluggy's ordering markers and a
# wrapper (each its own entry point, so that registration order alone would call them the other way round),
# and a command added through register_commands.
EXTRAS = {
    "agentcompass_extras/__init__.py": """
import json, os
import click
from agentcompass import hookimpl
from agentcompass.runtime.executor import Executor, LocalExecutor


class CountingExecutor(Executor):
    def __init__(self, out="", **options):
        super().__init__(**options)
        self.out, self.inner, self.count = out, LocalExecutor(), 0

    async def execute(self, attempts, context):
        outer = self

        class Counted:
            async def next(self):
                spec = await attempts.next()
                outer.count += spec is not None
                return spec

            def report(self, outcome):
                attempts.report(outcome)

        try:
            await self.inner.execute(Counted(), context)
        finally:
            with open(self.out, "w") as f:
                json.dump({"attempts": self.count}, f)


@hookimpl
def register_executors(register):
    register("counting", CountingExecutor)


@hookimpl
def register_commands(cli):
    @cli.command("hello")
    @click.argument("who")
    def hello(who):
        click.echo(f"hello {who}")
""",
    "agentcompass_extras/observers.py": """
import os
from agentcompass import hookimpl


def note(what):
    with open(os.environ["EXTRAS_LOG"], "a") as f:
        f.write(what + "\\n")
""",
    "agentcompass_extras/plain.py": """
from agentcompass import hookimpl
from agentcompass_extras.observers import note


@hookimpl
def agentcompass_run_finished(run_id, summary):
    note("plain")
""",
    "agentcompass_extras/first.py": """
from agentcompass import hookimpl
from agentcompass_extras.observers import note


@hookimpl(tryfirst=True)
def agentcompass_run_finished(run_id, summary):
    note("first " + str(summary.status_counts["COMPLETED"]))
""",
    "agentcompass_extras/around.py": """
from agentcompass import hookimpl
from agentcompass_extras.observers import note


@hookimpl(wrapper=True)
def agentcompass_run_finished(run_id, summary):
    note("before")
    result = yield
    note("after")
    return result
""",
    "pyproject.toml": """
[project]
name = "agentcompass-extras"
version = "0.0.1"
requires-python = ">=3.11"
dependencies = ["agentcompass-core"]

[project.entry-points.agentcompass]
extras = "agentcompass_extras"
extras_around = "agentcompass_extras.around"
extras_first = "agentcompass_extras.first"
extras_plain = "agentcompass_extras.plain"

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"
""",
}


@pytest.mark.slow
def test_pip_installed_third_party_plugin(tmp_path):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    pkg = tmp_path / "agentcompass-squares"
    (pkg / "agentcompass_squares").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text(PYPROJECT)
    (pkg / "agentcompass_squares" / "__init__.py").write_text(PLUGIN_MODULE)
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    subprocess.run([uv, "venv", "-q", "--python", "3.11", str(venv)], check=True, env=env, timeout=300)
    extras = tmp_path / "agentcompass-extras"
    for name, text in EXTRAS.items():
        (extras / name).parent.mkdir(parents=True, exist_ok=True)
        (extras / name).write_text(text.lstrip())
    subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    str(ROOT / "agentcompass_core"), str(pkg), str(extras)], check=True, env=env, timeout=600)
    exe = str(venv / "bin" / "agentcompass")
    listed = subprocess.run([exe, "plugins", "list", "--json"], capture_output=True, text=True, check=True,
                            cwd=tmp_path, env=env)
    plugins = {p["name"]: p for p in json.loads(listed.stdout)}
    assert set(plugins) == {"builtin", "squares", "extras", "extras_around", "extras_first", "extras_plain"}
    assert plugins["squares"]["version"] == "1.2.3"
    assert plugins["squares"]["registers"] == {"benchmark": ["squares"]}
    assert plugins["extras"]["registers"] == {"executor": ["counting"], "command": ["hello"]}
    assert all(p["error"] is None for p in plugins.values()), plugins
    log = tmp_path / "observers.log"
    run_env = {**env, "PATH": f"{venv}/bin:{env['PATH']}", "EXTRAS_LOG": str(log)}
    run = subprocess.run([exe, "run", "squares", "none", "mock", "--json", "-o", str(tmp_path / "run"),
                          "--executor", "counting", "--executor-arg", f"out={tmp_path / 'count.json'}"],
                         capture_output=True, text=True, cwd=tmp_path, env=run_env)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["status_counts"] == {"COMPLETED": 4} and summary["executor"] == "counting"
    assert summary["metrics"]["overall"]["score"]["mean"] == 0.5
    assert json.loads((tmp_path / "count.json").read_text()) == {"attempts": 4}  # the executor ran every attempt
    # The wrapper runs around the others; the tryfirst observer runs before the one registered after it.
    assert log.read_text().splitlines() == ["before", "first 4", "plain", "after"]
    hello = subprocess.run([exe, "hello", "world"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert hello.returncode == 0 and hello.stdout == "hello world\n", hello.stderr
