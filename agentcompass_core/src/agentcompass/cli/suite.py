"""``agentcompass suite run|show``: a thin layer over :mod:`agentcompass.suites`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentcompass.cli.common import emit_json, observing, plugin_host
from agentcompass.cli.errors import CLIError, cli_errors
from agentcompass.runtime.wording import counted


@click.group("suite")
def suite_group() -> None:
    """Run a grid of benchmarks x harnesses x models from one file, and read its leaderboard."""


@suite_group.command("run")
@click.argument("suite_file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--output", "-o", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Suite directory; each cell is a run directory DIR/CELL (default suites/STEM-TIME).")
@click.option("--resume", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Finish the suite in this directory: unfinished cells resume, failed ones run again.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=None,
              help="Attempts at once over ALL the cells (default: the largest concurrency of a cell).")
@click.option("--max-environments", type=click.IntRange(min=1), default=None,
              help="Live environments at once over all the cells.")
@click.option("--max-cost", type=click.FloatRange(min=0, min_open=True), default=None, metavar="USD",
              help="Stop every cell once the suite's model calls cost this much (needs known prices).")
@click.option("--retries", type=click.IntRange(min=0), default=2, show_default=True,
              help="How many times --resume runs a cell again that could not start or crashed.")
@click.option("--task-lines", is_flag=True, help="One line per finished task (the default off a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print the leaderboard as JSON on stdout.")
@click.pass_context
def suite_run(ctx: click.Context, suite_file: Path | None, output: Path | None, resume: Path | None,
              concurrency: int | None, max_environments: int | None, max_cost: float | None, retries: int,
              task_lines: bool, as_json: bool) -> None:
    """Run every cell of SUITE_FILE together (or --resume DIR), then print the leaderboard.

    Exit status: 0 when every cell finished with every task completed, 1 when a cell failed or has tasks in an
    error status, 2 for a bad suite file, 130 when interrupted.
    """
    import asyncio
    from datetime import UTC, datetime

    from agentcompass.cli.suite_progress import SuiteConsole
    from agentcompass.suites.cell_state import SuiteDirectory
    from agentcompass.suites.scheduler import SuiteRunner
    from agentcompass.suites.suite_file import load_suite_file

    if (suite_file is None) == (resume is None):
        raise CLIError("suite run needs SUITE_FILE or --resume DIR (one of them); e.g. agentcompass suite run "
                       "suite.toml")
    if resume is not None and output is not None and output != resume:
        raise CLIError("--output and --resume name different directories; give only --resume")
    with cli_errors():
        plan = load_suite_file(suite_file) if suite_file is not None else None
        if resume is not None:
            directory = SuiteDirectory(resume)
            n_cells = len(directory.read().cells)
        else:
            assert plan is not None and suite_file is not None
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
            directory = SuiteDirectory(output or Path("suites") / f"{suite_file.stem}-{stamp}")
            n_cells = len(plan.cells)
    host = plugin_host(ctx)
    console = SuiteConsole(n_cells, task_lines=task_lines)
    click.echo(f"suite directory: {directory.path}  ({counted(n_cells, 'cell')}; leaderboard: agentcompass suite show "
               f"{directory.path})", err=True)

    def on_signal(name: str, count: int) -> None:
        console.stop()
        click.echo(f"{name}: stopping every cell; closing environments and keeping finished results…"
                   if count == 1 else f"{name}: still stopping; the clean-up finishes on its own", err=True)

    runner = SuiteRunner(host, directory, concurrency=concurrency, max_environments=max_environments,
                         max_cost=max_cost, retries=retries, observer=console, on_signal=on_signal)
    try:
        with cli_errors(), observing(host, console, name="suite-console"):
            outcome = asyncio.run(runner.run(plan))
    finally:
        console.stop()
    _print_leaderboard(directory.path, None, as_json)
    if outcome.interrupted:
        click.echo(f"Interrupted; finished results are kept. Resume with: agentcompass suite run --resume "
                   f"{directory.path}", err=True)
    else:
        left = [c for c in outcome.cells if c.state not in ("finished",)]
        if left:
            click.echo(f"{len(left)} cell(s) not finished ({', '.join(f'{c.name}: {c.state}' for c in left)}); "
                       f"finish them with: agentcompass suite run --resume {directory.path}", err=True)
        unstarted = [c.name for c in left if (c.error or "").startswith("could not start")]
        if unstarted:
            source = directory.read().source
            click.echo(f"{', '.join(unstarted)} could not start (see the error above): fix "
                       f"{'its' if len(unstarted) == 1 else 'their'} definition in {source} first; a resume "
                       "takes the edited definition of a cell that never started", err=True)
        click.echo(f"leaderboard page: agentcompass report {directory.path}", err=True)
    ctx.exit(outcome.exit_code)


@suite_group.command("show")
@click.argument("suite_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--baseline", default=None, metavar="CELL",
              help="The cell the paired differences are against (default: the suite file's baseline, else each "
                   "benchmark's first cell).")
@click.option("--json", "as_json", is_flag=True, help="Print the leaderboard as JSON on stdout.")
def suite_show(suite_dir: Path, baseline: str | None, as_json: bool) -> None:
    """Show the leaderboard of SUITE_DIR: per benchmark, every cell's mean ± CI, pass^k, errors, tokens, cost,
    time and its paired difference against the baseline. Nothing in SUITE_DIR is changed."""
    _print_leaderboard(suite_dir, baseline, as_json)


def _print_leaderboard(path: Path, baseline: str | None, as_json: bool) -> None:
    from agentcompass.suites.leaderboard import leaderboard

    with cli_errors():
        data = leaderboard(path, baseline)
    for warning in data["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json(data)
        return
    click.echo(leaderboard_text(data))


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4f}"


def robustness_rows(cells: list[dict[str, Any]]) -> list[list[str]]:
    """The robustness table's rows: one per faulted cell that has a clean twin."""
    rows = []
    for c in cells:
        r = c.get("robustness")
        if not r:
            continue
        ci = r["ci95"]
        kinds = ", ".join(f"{k['kind']} {k['calls']}" + (f" {k['drop']:+.3f}" if k["drop"] is not None else "")
                          for k in r["kinds"]) or "-"
        rows.append([c["name"], str(r["profile"]), r["vs"], _num(r["clean_mean"]), _num(r["faulted_mean"]),
                     _signed(r["drop"]) + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""),
                     f"{r['faulted_calls']}/{r['calls']}", f"{r['errors_by_faults']} / {r['errors_by_agent']}",
                     kinds])
    return rows


def leaderboard_text(data: dict[str, Any]) -> str:
    from agentcompass.cli.render import table

    parts: list[str] = []
    for bench in data["benchmarks"]:
        rows = []
        for c in bench["cells"]:
            ci = c["ci95"]
            passk = c["pass_hat_k"]
            diff = c["difference"]
            if diff is None:
                diff_text = "baseline" if c["name"] == bench["baseline"] else "-"
            elif "error" in diff:
                diff_text = "n/a"
            else:
                dci = diff["ci95"]
                diff_text = _signed(diff["difference"]) + (f" [{dci[0]:+.3f}, {dci[1]:+.3f}]" if dci else "")
                if diff.get("mde") is not None:
                    diff_text += f" MDE {diff['mde']:.3f}"
                if diff.get("within_noise"):
                    diff_text += " within noise"
            rows.append([
                c["name"], c["harness"], c["model"], _num(c["mean"]),
                f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-",
                f"{passk['value']:.3f} (k={passk['k']})" if passk else "-",
                f"{c['errors']}" + (f" +{c['unfinished']} unfinished" if c["unfinished"] else ""),
                f"{c['tokens']:,}", _num(c["cost_usd"]), f"{c['duration_s']:.1f}", diff_text,
            ])
        parts.append(f"{bench['benchmark']} — {bench['label']} ({bench['primary_metric']}), paired difference vs "
                     f"{bench['baseline']}\n" + table(
                         ["cell", "harness", "model", "mean", "95% CI", "pass^k", "errors", "tokens", "cost USD",
                          "time s", "difference [95% CI] MDE"], rows))
        robust = robustness_rows(bench["cells"])
        if robust:
            parts.append(f"{bench['benchmark']} — robustness: each faulted cell against its clean twin\n" + table(
                ["cell", "faults", "vs", "clean", "faulted", "drop [95% CI]", "faulted calls",
                 "errors: faults / agent", "by fault kind: calls, drop on their tasks"], robust))
    others = [*data["not_run"], *data["skipped"]]
    if others:
        parts.append("not on the board:\n" + "\n".join(
            f"  {c['name']}: {c['state']}" + (f" — {c.get('error') or c.get('note')}"
                                             if c.get("error") or c.get("note") else "") for c in others))
    return "\n\n".join(parts) if parts else f"{data['suite']}: no cell has results yet"

