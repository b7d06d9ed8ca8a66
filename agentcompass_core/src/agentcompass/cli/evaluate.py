"""``agentcompass evaluate`` and ``agentcompass results compare``: scoring again, and comparing runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentcompass.cli.common import emit_json, observing, plugin_host
from agentcompass.cli.errors import CLIError, cli_errors, parse_pairs
from agentcompass.exit_codes import ExitCode


@click.command("evaluate")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None,
              help="The new run directory (default runs/NEW_RUN_ID); RUN_DIR itself is never changed.")
@click.option("--judge-model", default=None, help="Model for the judge role (replaces the run's).")
@click.option("--env", "-e", "environment", default=None, help="Environment for evaluation (default: the run's).")
@click.option("--env-arg", multiple=True, metavar="KEY=VALUE", help="Option for the environment.")
@click.option("--concurrency", "-c", type=int, default=None, help="Results scored at once (default: the run's).")
@click.option("--exclude-flagged", "exclude_flagged", multiple=True, metavar="SCANNER",
              help="Leave out the attempts this scanner flagged in RUN_DIR/scans.jsonl (repeatable; e.g. "
                   "reward-hacking, environment, judge).")
@click.option("--json", "as_json", is_flag=True, help="Print the new summary as JSON on stdout.")
@click.pass_context
def evaluate_command(ctx: click.Context, run_dir: Path, output: Path | None, judge_model: str | None,
                     environment: str | None, env_arg: tuple[str, ...], concurrency: int | None,
                     exclude_flagged: tuple[str, ...], as_json: bool) -> None:
    """Score the results of RUN_DIR again, without re-running them, with the benchmark as installed now.

    Runs only each benchmark's evaluate phase on what the run collected (its results, prepared tasks and
    artifacts) and writes a new run directory that records where it came from. Results that were not
    COMPLETED keep their status and error. --exclude-flagged SCANNER scores the run without the attempts that
    scanner flagged (agentcompass scan), and says how many were left out.
    """
    import asyncio

    from agentcompass.cli.progress import ConsoleReporter
    from agentcompass.cli.render import summary_text
    from agentcompass.runner import Runner
    from agentcompass.runtime.types import RunRequest
    from agentcompass.serialization import unstructure

    given: dict[str, Any] = {"environment": environment, "concurrency": concurrency,
                             "environment_args": parse_pairs(env_arg, "--env-arg") if env_arg else None}
    overrides = {k: v for k, v in given.items() if v is not None}
    request = RunRequest(benchmark="", harness="", model="").with_options(
        role_models={"judge": judge_model} if judge_model else {}, **overrides)
    _warn_if_unfinished(run_dir)
    host, console = plugin_host(ctx), ConsoleReporter(enabled=True)
    runner = Runner(host, request, run_dir=output, rescore_from=run_dir, given=frozenset(overrides),
                    exclude_flagged=exclude_flagged)
    with cli_errors(), observing(host, console):
        outcome = asyncio.run(runner.run())
    console.stop()
    excluded = _excluded(Path(outcome.run_dir)) if exclude_flagged else None
    if excluded is not None:
        click.echo(f"left out {excluded.replace(' flagged by ', ' results flagged by ', 1)} (scans.jsonl of "
                   f"{run_dir}); scored the other {outcome.summary.n_finished}", err=True)
    emit_json(unstructure(outcome.summary)) if as_json else click.echo(summary_text(outcome.summary))
    ctx.exit(outcome.exit_code)


def _excluded(run_dir: Path) -> str | None:
    """What ``run.json`` says ``--exclude-flagged`` left out (``"N flagged by SCANNER"``)."""
    from agentcompass.results.lines import RUN_JSON, read_json_file

    derived = read_json_file(run_dir / RUN_JSON).get("derived_from") or {}
    return derived.get("excluded_flagged") if isinstance(derived, dict) else None


def _warn_if_unfinished(run_dir: Path) -> None:
    """``evaluate`` scores only finished results: say so when the source run is unfinished."""
    from agentcompass.results.run_dir import RunDirectory
    from agentcompass.results.summary import summary_so_far

    with cli_errors():
        store = RunDirectory.open_existing(run_dir)
        summary = store.read_summary()
        if summary is None:
            summary = summary_so_far(store.read_run_info(), store.final_results(), (), str(run_dir))
    if summary.unfinished:
        click.echo(f"warning: {run_dir} is unfinished ({summary.n_unfinished} of {summary.n_planned} planned results "
                   f"have no final record): only its {summary.n_finished} finished results are scored again; "
                   f"finish it first with: agentcompass run --resume {run_dir}", err=True)


@click.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--by-category", is_flag=True, help="Also compare within each category.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON on stdout.")
@click.option("--plan", "plan_difference", type=float, default=None, metavar="D",
              help="Instead: the tasks × trials needed to detect a difference D, with RUN_A and RUN_B as the pilot.")
def compare_command(runs: tuple[Path, ...], by_category: bool, as_json: bool, plan_difference: float | None) -> None:
    """Compare RUN_B [RUN_C ...] against the baseline RUN_A on the tasks they share: paired differences, the
    smallest difference the runs could detect (MDE) and whether each is within noise."""
    from agentcompass.cli.render import comparison_text
    from agentcompass.results.comparison import compare, load_run
    from agentcompass.serialization import unstructure

    if len(runs) < 2:
        raise CLIError("compare needs at least two run directories: RUN_A RUN_B [...]", exit_code=ExitCode.USAGE)
    if plan_difference is not None:
        print_plan(runs[:2], plan_difference, None, as_json)
        return
    from agentcompass.results.robustness import pairs_of, robustness, robustness_text

    with cli_errors():
        loaded = [load_run(p) for p in runs]
        comparisons = [compare(loaded[0], other, by_category=by_category) for other in loaded[1:]]
        # A faulted run against a clean one: how much the faults cost (the robustness section).
        robust = {(r.clean, r.faulted): r for r in (robustness(c, f) for c, f in pairs_of(loaded))}
    if as_json:
        emit_json([{**unstructure(c), **({"robustness": unstructure(r)} if (r := robust.get((c.a, c.b)) or robust.get(
            (c.b, c.a))) else {})} for c in comparisons])
        return
    click.echo("\n\n".join(comparison_text(c) + "".join(f"\n\n{robustness_text(r)}" for key, r in robust.items()
                                                        if set(key) == {c.a, c.b}) for c in comparisons))


def print_plan(runs: tuple[Path, ...], difference: float, metric: str | None, as_json: bool) -> None:
    from agentcompass.cli.render import plan_text
    from agentcompass.results.comparison import load_run, plan_comparison
    from agentcompass.serialization import unstructure

    with cli_errors():
        plan = plan_comparison([load_run(p) for p in runs], difference, metric)
    if as_json:
        emit_json(unstructure(plan))
        return
    click.echo(plan_text(plan))


@click.command("plan")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--difference", "-d", type=float, required=True, metavar="D",
              help="The difference of the metric to detect (e.g. 0.05 for five points of a success rate).")
@click.option("--metric", default=None, help="The metric (default: the benchmark's primary one).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON on stdout.")
def plan_command(runs: tuple[Path, ...], difference: float, metric: str | None, as_json: bool) -> None:
    """How many tasks by trials detect a difference D (80% power, 5% two-sided), from a pilot: one run (RUN_DIR)
    or two runs over the same tasks (RUN_A RUN_B, their paired differences)."""
    if len(runs) > 2:
        raise CLIError("plan takes one pilot run, or two runs over the same tasks", exit_code=ExitCode.USAGE)
    print_plan(runs, difference, metric, as_json)
