"""``agentcompass validate``: run the ``oracle`` and ``nop`` harnesses over a benchmark's tasks and report the
tasks that are broken, that pass untouched, or whose verdict is flaky (:mod:`agentcompass.validation`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agentcompass.cli.common import emit_json, observing, plugin_host
from agentcompass.cli.errors import cli_errors, parse_pairs
from agentcompass.exit_codes import ExitCode

if TYPE_CHECKING:
    from agentcompass.validation import ValidityReport

#: ``--trials``' default: ``agentcompass.validation.DEFAULT_TRIALS``, written here so that the CLI's start-up does
#: not import the validation engine (a test holds the two equal).
DEFAULT_TRIALS = 3


def _verdicts(verdicts: tuple[bool, ...]) -> str:
    return "".join("P" if v else "F" for v in verdicts) or "-"


def validity_text(report: ValidityReport) -> str:
    """The console table: one row per task, its verdicts per trial (P pass, F fail), what is wrong, times."""
    from agentcompass.cli.render import table

    rows = []
    for t in report.tasks:
        rows.append([t.task_id, _verdicts(t.oracle), _verdicts(t.nop), f"{t.flip_rate:.2f}",
                     f"{t.seconds.get('oracle', {}).get('total', 0.0):.1f}",
                     f"{t.seconds.get('nop', {}).get('total', 0.0):.1f}", ", ".join(t.problems) or "ok"])
    lines = [f"validate {report.benchmark}: {len(report.tasks)} tasks × {report.trials} trials; a trial passes "
             f"when {report.metric} >= {report.threshold:.4g} (P pass, F fail, by trial)",
             table(["task", "oracle", "nop", "flip rate", "oracle s", "nop s", "finding"], rows)]
    bad = report.problem_tasks
    counts = {w: sum(1 for t in bad if w in t.problems) for w in ("oracle fails", "nop passes", "flaky")}
    lines.append(f"{len(bad)} of {len(report.tasks)} tasks with a problem: "
                 + ", ".join(f"{n} {w}" for w, n in counts.items()))
    for t in bad:
        for error in t.oracle_errors[:1]:
            lines.append(f"  {t.task_id}: oracle {error}")
    times = ", ".join(f"{phase} {s:.1f} s" for phase, s in report.seconds.items())
    lines.append(f"time: {times}")
    for phase, n in report.unfinished.items():
        if n:
            lines.append(f"unfinished: {n} {phase} results; finish with: agentcompass validate --resume "
                         f"{report.directory}")
    lines.append(f"validate directory: {report.directory} (oracle/ and nop/ are run directories)")
    return "\n".join(lines)


@click.command("validate")
@click.argument("benchmark", required=False)
@click.option("--benchmark-arg", "-b", multiple=True, metavar="KEY=VALUE", help="Option for the benchmark.")
@click.option("--env", "-e", "environment", default="local", show_default=True,
              help="Environment kind (local, docker, ...).")
@click.option("--env-arg", multiple=True, metavar="KEY=VALUE", help="Option for the environment.")
@click.option("--trials", type=click.IntRange(min=1), default=DEFAULT_TRIALS, show_default=True,
              help="Runs of each task under each harness.")
@click.option("--task-id", "-t", "task_ids", multiple=True, help="Validate only this task (repeatable).")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=None, help="Validate only the first N tasks.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=None, help="Tasks run at once.")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None,
              help="The validate directory (default runs/validate-BENCHMARK-TIME); oracle/ and nop/ are its runs.")
@click.option("--resume", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Finish an interrupted validation in DIR (its runs' recorded options).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON on stdout.")
@click.pass_context
def validate_command(ctx: click.Context, benchmark: str | None, benchmark_arg: tuple[str, ...], environment: str,
                     env_arg: tuple[str, ...], trials: int, task_ids: tuple[str, ...], limit: int | None,
                     concurrency: int | None, output: Path | None, resume: Path | None, as_json: bool) -> None:
    """Check BENCHMARK's tasks: run the reference solutions (oracle) and an agent that does nothing (nop), each
    --trials times, and report tasks whose oracle fails, whose untouched environment passes, or whose oracle
    verdict differs between trials.

    Exit status: 0 when every task is sound, 1 when any has a problem, 2 for a usage error (a benchmark without
    reference solutions), 130 when interrupted.
    """
    import asyncio

    from agentcompass.cli.progress import ConsoleReporter
    from agentcompass.runtime.types import RunRequest
    from agentcompass.serialization import unstructure
    from agentcompass.validation import read_validity, validate_benchmark

    host = plugin_host(ctx)
    if resume is not None:
        with cli_errors():
            info_path = resume / "oracle" / "run.json"
            if not info_path.exists():
                raise click.ClickException(f"{resume} is not a validate directory (no oracle/run.json)")
            from agentcompass.results.run_dir import RunDirectory

            request = RunDirectory.open_existing(resume / "oracle").read_run_info().request
        directory = resume
    else:
        if not benchmark:
            raise click.UsageError("validate needs BENCHMARK (or --resume DIR); e.g. agentcompass validate "
                                   "harbor -b path=docs/examples/harbor-tasks --env docker")
        options: dict[str, object] = {"trials": trials, "task_ids": task_ids, "limit": limit}
        if concurrency is not None:
            options["concurrency"] = concurrency
        request = RunRequest(benchmark=benchmark, harness="oracle", model="mock", environment=environment,
                             benchmark_args=parse_pairs(benchmark_arg, "--benchmark-arg"),
                             environment_args=parse_pairs(env_arg, "--env-arg")).with_options(**options)
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        directory = output or Path("runs") / f"validate-{benchmark}-{stamp}"
    console = ConsoleReporter(enabled=True)
    with cli_errors(), observing(host, console):
        try:
            report = asyncio.run(validate_benchmark(host, request, directory))
        except KeyboardInterrupt:
            console.stop()
            click.echo(f"Interrupted; finish with: agentcompass validate --resume {directory}", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
    console.stop()
    with cli_errors():
        report = read_validity(directory)
    if as_json:
        data = unstructure(report)
        for task, raw in zip(report.tasks, data["tasks"], strict=True):
            raw["problems"] = list(task.problems)
        emit_json(data)
    else:
        click.echo(validity_text(report))
    if any(report.unfinished.values()):
        ctx.exit(ExitCode.INTERRUPTED)
    ctx.exit(ExitCode.OK if report.sound else ExitCode.TASK_ERRORS)
