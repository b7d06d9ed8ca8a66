"""Bad input gets one clear line and no traceback; the CLI's read-only commands work."""

from __future__ import annotations

import json

import pytest
from agentcompass.cli.main import cli
from agentcompass.exit_codes import ExitCode
from click.testing import CliRunner

from tests.helpers.cli_processes import run_cli_subprocess


def invoke(host, *args):
    return CliRunner().invoke(cli, list(args), obj={"plugin_host": host})


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "example_interactiv", "none", "mock"], "unknown benchmark 'example_interactiv'; did you mean 'example_interactive'"),
        (["run", "scripted", "nope", "mock"], "unknown harness 'nope'"),
        (["run", "scripted", "none", "mock", "--env", "locl"], "did you mean 'local'"),
        (["run", "scripted", "none", "mokc"], "unknown model 'mokc'; did you mean 'mock'"),
        (["run", "plain", "none", "mock"], "needs an agent harness"),
        (["run", "scripted", "react", "mock"], "run it with the harness 'none'"),
        (["run", "plain", "oracle", "mock"], "has no reference solutions"),
        (["run", "scripted", "none", "mock", "-b", "n5"], "--benchmark-arg takes KEY=VALUE, got 'n5'"),
        (["run", "scripted", "none", "mock", "-b", "colour=red"], "unknown option(s) colour"),
        (["run", "scripted", "none", "mock", "-t", "t99"], "unknown task id(s) t99"),
        (["run", "scripted", "none", "mock", "--phase-timeout", "runn=3"], "unknown phase(s) runn"),
        (["run", "scripted", "none", "mock", "-c", "0"], "--concurrency must be at least 1"),
        (["run", "scripted", "none", "mock", "--user-model", "nosuch/x"], "unknown model 'nosuch'"),
        (["run", "scripted"], "run needs BENCHMARK HARNESS MODEL"),
        (["run", "--resume", "/nonexistent/run"], "does not exist"),
    ],
)
def test_usage_errors_are_one_line_with_exit_status_2(host, tmp_path, args, expected):
    result = invoke(host, *args, *(["-o", str(tmp_path / "r")] if "--resume" not in args else []))
    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "r").exists(), "nothing is written before the input is known to be good"


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("init", "benchmark 'broken' failed to start: FileNotFoundError: data/tasks.jsonl"),
        ("tasks", "benchmark 'broken' failed to load its tasks: KeyError: 'task_id'"),
        ("spec", "benchmark 'broken' has no environment for task 'a': RuntimeError: no image configured"),
    ],
)
def test_a_plugin_bug_before_the_run_is_one_line_not_a_traceback(host, tmp_path, where, expected):
    result = invoke(host, "run", "broken", "nop", "mock", "-b", f"where={where}", "-o", str(tmp_path / "r"))
    assert result.exit_code == ExitCode.SETUP
    assert result.stderr.strip() == f"Error: {expected}"
    assert not (tmp_path / "r").exists()


def test_resume_refuses_a_run_of_another_benchmark(host, tmp_path):
    assert invoke(host, "run", "scripted", "none", "mock", "-o", str(tmp_path / "r")).exit_code == 0
    before = (tmp_path / "r" / "results.jsonl").read_text()
    result = invoke(host, "run", "seed_interactive", "none", "mock", "--resume", str(tmp_path / "r"))
    assert result.exit_code == 2
    assert "belongs to a run of benchmark 'scripted', not 'seed_interactive'" in result.stderr
    assert (tmp_path / "r" / "results.jsonl").read_text() == before  # nothing lost


def test_output_directory_holding_a_run_is_not_overwritten(host, tmp_path):
    assert invoke(host, "run", "scripted", "none", "mock", "-o", str(tmp_path / "r")).exit_code == 0
    result = invoke(host, "run", "scripted", "none", "mock", "-o", str(tmp_path / "r"))
    assert result.exit_code == 2 and "already holds a run" in result.stderr


def test_tasks_list_and_results_show(host, tmp_path):
    listed = invoke(host, "tasks", "list", "scripted", "-b", "n=3", "--json")
    assert json.loads(listed.stdout) == [{"task_id": f"t{i}", "category": c}
                                         for i, c in enumerate(["even", "odd", "even"])]
    invoke(host, "run", "scripted", "none", "mock", "-o", str(tmp_path / "r"), "-b", "faults=t1:evaluate=raise")
    shown = invoke(host, "results", "show", str(tmp_path / "r"), "--tasks")
    assert shown.exit_code == 0
    assert "EVAL_ERROR" in shown.stdout and "evaluate blew up on purpose" in shown.stdout
    data = json.loads(invoke(host, "results", "show", str(tmp_path / "r"), "--json", "--tasks").stdout)
    assert data["status_counts"] == {"COMPLETED": 3, "EVAL_ERROR": 1}
    assert len(data["tasks"]) == 4


def test_results_show_of_a_directory_without_a_run(host, tmp_path):
    result = invoke(host, "results", "show", str(tmp_path))
    assert result.exit_code == 2 and "not a run directory" in result.stderr


def test_main_job_of_the_readme_in_a_real_subprocess(tmp_path):
    proc = run_cli_subprocess("run", "example_interactive", "none", "mock", "-o", str(tmp_path / "r"), "--json",
                              testing=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["n_tasks"] >= 10 and summary["status_counts"] == {"COMPLETED": summary["n_tasks"]}
    assert 0 < summary["metrics"]["overall"]["score"]["mean"] < 1  # the mock agent solves some, not all


# -- bad options and setup failures, through a real subprocess ---------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (["--timeout", "0"], "--timeout must be a positive number of seconds, got 0"),
    (["--timeout", "-5"], "--timeout must be a positive number of seconds, got -5"),
    (["--phase-timeout", "prepare=0"], "--phase-timeout prepare must be a positive number"),
    (["--limit", "0"], "--limit must be at least 1"),
    (["-m", "foo=1"], "model 'mock' has no option 'foo'"),
    (["--env-arg", "bogus=1"], "bogus"),
    (["--executor", "nowhere"], "unknown executor 'nowhere'"),
    (["--executor-arg", "x=1"], "takes no options"),
])
def test_bad_options_are_usage_errors_with_exit_2_and_nothing_written(tmp_path, args, message):
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-o", str(tmp_path / "r"), *args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "r").exists()


def test_an_unwritable_output_is_a_setup_error_with_a_plain_message(tmp_path):
    target = "/proc/agentcompass-run"  # not creatable, even for root
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "-o", target)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith(f"Error: cannot create run directory {target}") and "unexpected" not in proc.stderr


def test_no_docker_engine_is_a_setup_error_naming_how_to_start_one(tmp_path):
    proc = run_cli_subprocess("run", "scripted", "none", "mock", "--env", "docker", "-o", str(tmp_path / "r"),
                              env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert proc.returncode == 3, proc.stderr
    assert "docker" in proc.stderr.lower() and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_messages_name_a_benchmark_by_its_registered_name_even_when_its_class_has_none(tmp_path):
    # The spec's benchmark class defines no `name`; the runtime gives the instance the name it is registered under.
    proc = run_cli_subprocess("run", "seed_interactive", "react", "mock", "-o", str(tmp_path / "r"))
    assert proc.returncode == 2
    assert "benchmark 'seed_interactive' drives its own loop" in proc.stderr, proc.stderr


def test_every_option_of_every_command_has_help(host):
    """Issue 32, item 15: no option shows an empty line in ``--help`` (the bundled plugins' commands included)."""
    import click

    host.add_commands(cli)
    empty = []

    def walk(command: click.Command, path: str) -> None:
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip():
                empty.append(f"{path} {'/'.join(param.opts)}")
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}")

    walk(cli, "agentcompass")
    assert empty == []


def test_the_offline_mock_costs_nothing_and_counts_are_in_words(host, tmp_path):
    """Issue 32, item 15: the mock has a price (0), so its cost is 0 and not unknown; "1 call", not "1 calls"."""
    from agentcompass.cli.render import usage_text
    from agentcompass.models.prices import PriceTable
    from agentcompass.runtime.records import RunMetrics, RunSummary

    assert PriceTable().lookup("mock") is not None and PriceTable().lookup("mock").cost(10, 10) == 0
    assert PriceTable().lookup("mockingbird") is None  # only the mock provider, not a name like it
    result = invoke(host, "run", "example_interactive", "none", "mock", "-n", "1", "-o", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    usage = json.loads((tmp_path / "r" / "summary.json").read_text())["usage"]["agent"]
    assert usage["cost_usd"] == 0
    assert ", 0.0000 USD" in result.stderr + result.stdout
    one = RunSummary(run_id="r", benchmark="b", harness="h", model="m", environment="local", n_tasks=1,
                     n_finished=1, status_counts={"COMPLETED": 1}, primary_metric="score",
                     metrics=RunMetrics(overall={}), usage={"agent": _usage(calls=1, prompt_tokens=1, completion_tokens=0)})
    assert usage_text(one) == "usage — agent: 1 call, 1 token"


def _usage(**fields):
    from agentcompass.runtime.records import RoleUsage

    return RoleUsage(**fields)


def test_results_compare_shows_metric_labels(host, tmp_path):
    """Issue 32, item 15: ``results compare`` names metrics by their labels, as the summary and report do."""
    for name in ("a", "b"):
        done = invoke(host, "run", "example_interactive", "none", "mock", "-n", "2", "--seed", "1",
                      "-o", str(tmp_path / name))
        assert done.exit_code == 0, done.output
    shown = invoke(host, "results", "compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert shown.exit_code == 0, shown.output
    row = [ln for ln in shown.stdout.splitlines() if ln.startswith(("Reward", "score"))]
    assert len(row) == 1 and row[0].startswith("Reward "), shown.stdout
    data = json.loads(invoke(host, "results", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json").stdout)
    assert data[0]["metrics"][0]["metric"] == "score" and data[0]["metrics"][0]["label"] == "Reward"
