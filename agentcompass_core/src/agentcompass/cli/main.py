"""The ``agentcompass`` command: a thin click layer over the library.

Heavy modules (runner, gateway, rich) are imported inside the commands that need them, so that
``agentcompass plugins list`` starts fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agentcompass import __version__
from agentcompass.cli.common import emit_json, plugin_host
from agentcompass.cli.ctl import ctl_group
from agentcompass.cli.errors import cli_errors, parse_pairs
from agentcompass.cli.evaluate import compare_command, evaluate_command, plan_command
from agentcompass.cli.new import new_command
from agentcompass.cli.run import run_command
from agentcompass.cli.scan import findings_table, scan_command
from agentcompass.cli.suite import suite_group
from agentcompass.cli.validate import validate_command
from agentcompass.exit_codes import ExitCode
from agentcompass.plugins import load_plugins

if TYPE_CHECKING:
    from agentcompass.results.run_dir import RunDirectory


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentcompass")
def cli() -> None:
    """Evaluate LLM agents: run a BENCHMARK with a HARNESS and a MODEL in an environment."""


cli.add_command(run_command)
cli.add_command(evaluate_command)
cli.add_command(suite_group)
cli.add_command(validate_command)
cli.add_command(scan_command)
cli.add_command(new_command)
cli.add_command(ctl_group)


# -- plugins ---------------------------------------------------------------------------------------------


@cli.group("plugins")
def plugins_group() -> None:
    """Inspect installed plugins."""


@plugins_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Stable JSON: name, version, registers, hooks, error.")
@click.option("--all", "show_all", is_flag=True, help="Include plugins skipped by AGENTCOMPASS_LOAD_PLUGINS.")
@click.pass_context
def plugins_list(ctx: click.Context, as_json: bool, show_all: bool) -> None:
    """List plugins, what each registers, and any load error."""
    from agentcompass.serialization import unstructure

    host = plugin_host(ctx, include_skipped=show_all)
    records = sorted(host.records.values(), key=lambda r: r.name)
    if as_json:
        emit_json([unstructure(r) for r in records])
        return
    from agentcompass.cli.render import table

    rows = []
    for r in records:
        provides = "; ".join(
            f"{k}: {', '.join(f'{n} {r.versions[n]}' if n in r.versions else n for n in v)}"
            for k, v in r.registers.items()
        )
        state = f"ERROR: {r.error}" if r.error else provides or ("skipped" if not r.loaded else "-")
        rows.append([r.name, r.version or "-", state])
    click.echo(table(["plugin", "version", "provides"], rows))
    limits: dict[str, list[str]] = {}
    for r in records:
        for name, said in r.limits.items():
            limits.setdefault(said, []).append(name)
    for said, names in sorted(limits.items()):
        click.echo(f"limits of {', '.join(sorted(names))}: {said} (change with --harness-arg max_calls=N / "
                   "max_tokens=N, 0 for none)")


# -- tasks -----------------------------------------------------------------------------------------------


@cli.group("tasks")
def tasks_group() -> None:
    """Inspect a benchmark's tasks."""


@tasks_group.command("list")
@click.argument("benchmark")
@click.option("--benchmark-arg", "-b", multiple=True, metavar="KEY=VALUE",
              help="An option of the benchmark (repeatable), as for run.")
@click.option("--json", "as_json", is_flag=True, help="Print the tasks as JSON on stdout.")
@click.pass_context
def tasks_list(ctx: click.Context, benchmark: str, benchmark_arg: tuple[str, ...], as_json: bool) -> None:
    """List the tasks of BENCHMARK."""
    import asyncio

    from agentcompass.resolve import construct_plugin, load_tasks
    from agentcompass.runtime.types import RunRequest

    host = plugin_host(ctx)
    args = parse_pairs(benchmark_arg, "--benchmark-arg")
    with cli_errors():
        bench = construct_plugin("benchmark", benchmark, host.factory("benchmark", benchmark), args)
        req = RunRequest(benchmark=benchmark, harness="", model="", benchmark_args=args)
        tasks = asyncio.run(load_tasks(bench, req))
    if as_json:
        emit_json([{"task_id": t.task_id, "category": t.category} for t in tasks])
        return
    from agentcompass.cli.render import table

    click.echo(table(["task_id", "category"], [[t.task_id, t.category or "-"] for t in tasks]))
    from agentcompass.runtime.wording import counted

    click.echo(counted(len(tasks), "task"))


# -- results ---------------------------------------------------------------------------------------------


@cli.group("results")
def results_group() -> None:
    """Inspect run directories."""


results_group.add_command(compare_command)
results_group.add_command(plan_command)


@results_group.command("show")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary (and tasks) as JSON on stdout.")
@click.option("--tasks", "show_tasks", is_flag=True,
              help="Also list every task's final status (errors shortened to one line).")
@click.option("--task", "task_id", default=None, metavar="TASK_ID",
              help="Show only this task's final results, with each whole error.")
@click.option("--flagged", is_flag=True,
              help="List the scanners' findings (scans.jsonl: run --scan, agentcompass scan) with their evidence.")
def results_show(run_dir: Path, as_json: bool, show_tasks: bool, task_id: str | None, flagged: bool) -> None:
    """Show the summary (and per-task results) of RUN_DIR. Nothing in RUN_DIR is changed."""
    from agentcompass.results.run_dir import RunDirectory
    from agentcompass.results.summary import summary_so_far
    from agentcompass.serialization import unstructure

    with cli_errors():
        store = RunDirectory.open_existing(run_dir)
        if flagged:
            _show_flagged(run_dir, as_json)
            return
        if task_id is not None:
            _show_task(store, run_dir, task_id, as_json)
            return
        summary = store.read_summary()
        results = store.final_results() if show_tasks or summary is None else {}
        if summary is None:  # still going, or killed: what it has so far, from run.json and the results
            summary = summary_so_far(store.read_run_info(), results, store.attempt_results(), str(run_dir))
            click.echo(f"{run_dir} has no summary.json (the run is still going or was killed): these are its "
                       f"results so far; finish it with: agentcompass run --resume {run_dir}", err=True)
    for warning in store.warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        data = unstructure(summary)
        if show_tasks:
            data["tasks"] = [unstructure(r) for r in results.values()]
        emit_json(data)
        return
    from agentcompass.cli.render import TABLE_ERROR, summary_text, table
    from agentcompass.runtime.shortening import shorten

    click.echo(summary_text(summary))
    if show_tasks:
        rows = [[r.task_id, r.trial, r.status.value, ", ".join(f"{k}={v:g}" for k, v in r.metrics.items()),
                 shorten(r.error or "", TABLE_ERROR)] for r in results.values()]
        click.echo(table(["task_id", "trial", "status", "metrics", "error"], rows))
        if any(r.error and shorten(r.error, TABLE_ERROR) != r.error for r in results.values()):
            click.echo(f"(errors shortened; a task's whole error: agentcompass results show {run_dir} --task ID)")


def _show_flagged(run_dir: Path, as_json: bool) -> None:
    """``results show --flagged``: every finding of ``scans.jsonl``, one row each."""
    from agentcompass.scanning import store as scans
    from agentcompass.scanning.names import SCANS

    found = scans.read(run_dir / SCANS)
    if as_json:
        emit_json(found)
        return
    if not (run_dir / SCANS).exists():
        click.echo(f"{run_dir} was not scanned; scan it with: agentcompass scan {run_dir}")
        return
    click.echo(f"{len(found)} findings in {run_dir / SCANS}")
    if found:
        click.echo(findings_table(found))


def _show_task(store: RunDirectory, run_dir: Path, task_id: str, as_json: bool) -> None:
    """``results show --task``: the task's final result of each trial, every field whole."""
    from agentcompass.serialization import unstructure

    results = [r for r in store.final_results().values() if r.task_id == task_id]
    if not results:
        known = sorted({r.task_id for r in store.final_results().values()})
        sample = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
        raise click.ClickException(f"{run_dir} has no final result of task {task_id!r}; its tasks: "
                                   f"{sample or 'none yet'}")
    if as_json:
        emit_json([unstructure(r) for r in sorted(results, key=lambda r: r.trial)])
        return
    for r in sorted(results, key=lambda r: r.trial):
        click.echo(f"task {r.task_id} trial {r.trial}: {r.status.value}"
                   + (f" (attempt {r.attempt})" if r.attempt > 1 else ""))
        if r.category:
            click.echo(f"  category: {r.category}")
        if r.metrics:
            click.echo("  metrics: " + ", ".join(f"{k}={v:g}" for k, v in r.metrics.items()))
        if r.error:
            click.echo(f"  error{f' (in {r.error_phase})' if r.error_phase else ''}:")
            click.echo("\n".join(f"    {line}" for line in r.error.splitlines()))


# -- env -------------------------------------------------------------------------------------------------


@cli.group("env")
def env_group() -> None:
    """Manage environments."""


@env_group.command("prune")
@click.option("--env", "-e", "environment", default="docker", show_default=True,
              help="The environment provider whose left-overs to remove.")
@click.option("--run-id", default=None, help="Only what this run left behind.")
@click.option("--env-arg", multiple=True, metavar="KEY=VALUE",
              help="Option for the environment, as the run had it (e.g. engine=podman for the docker one).")
@click.pass_context
def env_prune(ctx: click.Context, environment: str, run_id: str | None, env_arg: tuple[str, ...]) -> None:
    """Remove environments that killed runs left behind (never those of a run still going)."""
    import asyncio

    from agentcompass.models.gateway import prune_socket_dirs
    from agentcompass.runtime.environment import PruneReport

    host = plugin_host(ctx)
    with cli_errors():
        provider = host.factory("environment", environment)(**parse_pairs(env_arg, "--env-arg"))
        outcome = asyncio.run(provider.prune(run_id))
        sockets = prune_socket_dirs(run_id)
    report = outcome if isinstance(outcome, PruneReport) else PruneReport(int(outcome))
    scope = f"run {run_id}" if run_id else "all runs"
    click.echo(f"removed {report.removed} {environment} environment(s) of {scope}"
               + (f" and {sockets} model-gateway socket director{'y' if sockets == 1 else 'ies'}" if sockets else ""))
    for line in report.skipped:
        click.echo(f"kept {line}")


def main() -> None:
    """The ``agentcompass`` command: load the plugins once, let them add their commands, run."""
    try:
        host = load_plugins()
        if host.unknown_selected:
            click.echo(f"warning: {host.selection_note()}", err=True)
        host.add_commands(cli)
        cli(prog_name="agentcompass", obj={"plugin_host": host, "loaded": True})
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(ExitCode.INTERRUPTED)


if __name__ == "__main__":
    main()
