"""``agentcompass new KIND NAME``: write a plugin package to start from (:mod:`agentcompass.scaffold`)."""

from __future__ import annotations

from pathlib import Path

import click

from agentcompass.cli.errors import cli_errors
from agentcompass.scaffold import KINDS, plugin_names, write_plugin


@click.command("new")
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("name")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Where to write the package's directory (agentcompass-NAME).")
def new_command(kind: str, name: str, directory: Path) -> None:
    """Write a pip-installable KIND plugin called NAME: its pyproject.toml with the agentcompass entry point, a
    minimal working implementation, a README and a test that uses the testing kit."""
    with cli_errors():
        root = write_plugin(kind, name, directory)
        names = plugin_names(kind, name)
    click.echo(f"wrote the {kind} plugin {name!r} ({names.distribution}, package {names.package}) in {root}")
    where = root.absolute()
    click.echo(f"next: pip install -e '{where}[test]' && agentcompass plugins list && pytest {where}")
