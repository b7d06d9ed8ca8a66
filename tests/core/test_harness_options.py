"""Every bundled harness refuses a ``--harness-arg`` key it does not know: one line naming the key and the
known ones, exit status 2, nothing written (before, ``none`` and ``oracle`` ignored them and exited 0)."""

from __future__ import annotations

import pytest
from agentcompass.cli.main import cli
from agentcompass.exit_codes import ExitCode
from agentcompass.plugins import load_plugins
from click.testing import CliRunner

from tests.helpers.cli_processes import run_cli_subprocess

HARNESSES = sorted(load_plugins().names("harness"))
#: A benchmark each harness runs (``none`` needs one that drives its own loop).
BENCHMARK = {"none": "example_interactive"}


def test_every_bundled_harness_is_checked() -> None:
    assert {"none", "nop", "oracle", "react", "command", "mini-swe-agent", "codex"} <= set(HARNESSES)


@pytest.mark.parametrize("harness", HARNESSES)
def test_an_unknown_harness_option_is_a_one_line_usage_error(harness: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["run", BENCHMARK.get(harness, "example_coding"), harness, "mock",
                                      "--harness-arg", "colour=red", "-o", str(out)])
    assert result.exit_code == ExitCode.USAGE, result.output
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert f"unknown option(s) 'colour' for harness {harness!r}" in line
    assert "valid options:" in line or "it takes no options" in line
    assert not out.exists()


@pytest.mark.parametrize("harness", ["none", "oracle"])
def test_the_builtin_harnesses_say_they_take_no_options(harness: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    benchmark = BENCHMARK.get(harness, "example_coding")
    done = run_cli_subprocess("run", benchmark, harness, "mock", "--harness-arg", "x=1",
                              "-o", str(tmp_path / "run"), testing=False)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert done.stderr.strip() == (f"Error: unknown option(s) 'x' for harness {harness!r}; it takes no options")
