"""Entry point of agentcompass-export: the ``export`` command group (``register_commands``).

    agentcompass export inspect RUN_DIR [-o FILE]    # an Inspect log: inspect view, inspect_ai.log.read_eval_log
    agentcompass export atif RUN_DIR [-o DIR]        # Harbor's ATIF: DIR/<task>__trial-<n>/agent/trajectory.json

Imports stay inside the commands, so that every start of ``agentcompass`` stays fast. Nothing in RUN_DIR is
changed (the outputs go inside it only by default).
"""

from __future__ import annotations

from pathlib import Path

import click
from agentcompass import hookimpl

#: Exit status of bad input (a missing or damaged run directory, a missing optional dependency).
USAGE_EXIT = 2


class ExportError(click.ClickException):
    """One line on stderr, no traceback."""

    exit_code = USAGE_EXIT

    def show(self, file=None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


def _open(run_dir: Path):
    from agentcompass.errors import AgentCompassError

    from agentcompass_export.source import RunSource

    try:
        source = RunSource.open(run_dir)
    except AgentCompassError as exc:
        raise ExportError(str(exc)) from None
    if source.summary is None:
        click.echo(f"warning: {run_dir} has no summary.json (the run is going on or was killed): exporting the "
                   f"{len(source.results)} results finished so far", err=True)
    return source


def _warn(source) -> None:
    for warning in source.warnings:
        click.echo(f"warning: {warning}", err=True)


@click.group("export")
def export_group() -> None:
    """Write a run in another tool's format (Inspect's log, Harbor's ATIF trajectories)."""


@export_group.command("inspect")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="The log file: .eval (default RUN_DIR/RUN_ID.eval) or .json.")
def export_inspect_command(run_dir: Path, output: Path | None) -> None:
    """Write RUN_DIR as an Inspect log (open it with: inspect view --log-dir DIR).

    Each (task, trial) is a sample (epoch = trial) with its conversation, tool calls, scores and usage; a task
    that ended in an error status is an errored sample. Needs inspect_ai (agentcompass-export[inspect]).
    """
    from agentcompass.errors import AgentCompassError

    from agentcompass_export.inspect_log import default_output, export_inspect, require_inspect

    try:
        require_inspect()
    except AgentCompassError as exc:
        raise ExportError(str(exc)) from None
    source = _open(run_dir)
    path = export_inspect(source, output or default_output(source))
    _warn(source)
    click.echo(f"wrote {path} ({len(source.results)} samples)")


@export_group.command("atif")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="The directory to write (default RUN_DIR/atif).")
def export_atif_command(run_dir: Path, output: Path | None) -> None:
    """Write each (task, trial) of RUN_DIR as a Harbor ATIF trajectory.

    One directory per trial, OUTPUT/TASK__trial-N/agent/trajectory.json, holding one agent step per model call
    with its tool calls and their results.
    """
    from agentcompass_export.atif import export_atif

    source = _open(run_dir)
    written = export_atif(source, output or source.path / "atif")
    _warn(source)
    click.echo(f"wrote {written} trajectories to {output or source.path / 'atif'}")


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(export_group)
