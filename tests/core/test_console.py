"""The console: an observer plugin of the run's hooks (what it prints, that it failing never stops a run), the
plain line per finished task with its trial, and the live status line's figures."""

from __future__ import annotations

from agentcompass import hookimpl
from agentcompass.cli.common import observing
from agentcompass.cli.progress import ConsoleReporter, Progress
from agentcompass.runner import Runner
from agentcompass.runtime import RunRequest, RunResult, TaskStatus
from agentcompass.runtime.records import LiveFigures

from tests.helpers.cli_processes import run_cli_subprocess


async def test_a_failing_console_is_reported_and_the_run_goes_on(host, tmp_path, capsys):
    class BrokenConsole(ConsoleReporter):
        @hookimpl
        def agentcompass_run_started(self, request, run_dir, n_work, n_finished, figures) -> None:
            raise RuntimeError("console bug")

    req = RunRequest(benchmark="scripted", harness="none", model="mock", benchmark_args={"n": "2"})
    with observing(host, BrokenConsole(task_lines=True)):
        outcome = await Runner(host, req, run_dir=tmp_path / "r", handle_signals=False).run()
    assert outcome.summary.status_counts == {"COMPLETED": 2}
    logs = (tmp_path / "r" / "logs.jsonl").read_text()
    assert "plugin.observer_failed" in logs and "console bug" in logs
    assert "agentcompass-console" not in host.records  # registered for the block only


def test_the_console_prints_what_the_hooks_announce(tmp_path):
    done = run_cli_subprocess("run", "scripted", "none", "mock", "-b", "n=2", "-c", "9", "-o", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    assert "warning: --concurrency 9 is more than this run can use (2 attempts to run): using 2" in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert sorted(line.split()[0] for line in lines) == ["[1/2]", "[2/2]"]
    assert all(" COMPLETED" in line for line in lines), lines


def test_trials_are_named_in_progress_lines(tmp_path):
    done = run_cli_subprocess("run", "example_interactive", "none", "mock", "-n", "2", "--trials", "2", "-o",
                              str(tmp_path / "r"), testing=False)
    assert done.returncode == 0, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.startswith("[")]
    assert len(lines) == 4 and sum("trial 2/2" in x for x in lines) == 2


def test_the_live_status_line_has_done_running_errored_rate_eta_and_cost():
    progress = Progress(enabled=False)
    progress.start(10, 2, figures=lambda: LiveFigures(3, 0.0125))
    progress.task_done(RunResult(task_id="a", status=TaskStatus.RUN_ERROR), 3, 10)
    line = progress.status_line()
    for part in ("done 3/10", "running 3", "errored 1", "/min", "ETA ", "cost 0.0125 USD"):
        assert part in line, line


async def test_the_live_status_line_counts_the_runs_model_calls_and_tokens(tmp_path) -> None:
    """A real run (example_interactive, the mock model) observed by the console: the status line's calls and
    tokens are the run's (before, it showed neither, so a runaway agent spent unseen)."""
    from agentcompass.plugins import load_plugins

    host = load_plugins()
    console = ConsoleReporter(enabled=False)
    req = RunRequest(benchmark="example_interactive", harness="none", model="mock").with_options(limit=3)
    with observing(host, console):
        outcome = await Runner(host, req, run_dir=tmp_path / "r", handle_signals=False).run()
    usage = outcome.summary.usage["agent"]
    calls, tokens = usage.calls, usage.prompt_tokens + usage.completion_tokens
    assert calls > 0 and tokens > 0
    line = console.progress.status_line()
    assert f"calls {calls:,}" in line and f"tokens {tokens:,}" in line, line
