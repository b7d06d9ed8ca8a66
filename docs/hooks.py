"""The documentation site's one MkDocs hook (mkdocs.yml ``hooks:``): pages hold placeholders that it fills in when
the site is built, so that nothing is written twice.

* ``<!-- cli-reference -->``: every command of ``agentcompass`` (the core's and the installed plugins', as
  ``main()`` builds the command line) with its usage, help and every option, rendered from the click objects;
* ``<!-- api-reference -->``: a mkdocstrings block (``::: module``) for every module of
  ``agentcompass.runtime.PUBLIC_MODULES`` and ``TESTING_MODULES``, rendered from their docstrings;
* ``<!-- readme: HEADING -->``: the README section under that heading (its sub-headings lifted to the page's
  levels); ``<!-- readme-intro: HEADING -->``: only its text before its first sub-heading;
  ``<!-- include: PATH -->``: a whole Markdown file of the repository (a plugin's README).

Links into the repository (``plugins/NAME/README.md``, ``docs/report.png``) are rewritten to the site's pages.
A placeholder naming a heading or file that does not exist stops the build (``mkdocs build --strict``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

_PLACEHOLDER = re.compile(r"<!-- (cli-reference|api-reference|readme(?P<intro>-intro)?: (?P<heading>.+?)"
                          r"|include: (?P<path>.+?)) -->")
_HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")

#: Where a link into the repository, or to a README section, goes on the site (absolute from the site's root).
LINKS = {
    "plugins/agentcompass-agents/README.md": "/guides/agents.md",
    "plugins/agentcompass-docker/README.md": "/guides/environments.md",
    "plugins/agentcompass-harbor/README.md": "/benchmarks/harbor.md",
    "plugins/agentcompass-harnesses/README.md": "/guides/harnesses.md",
    "plugins/agentcompass-models/README.md": "/guides/models.md",
    "plugins/agentcompass-swebench/README.md": "/benchmarks/swebench.md",
    "plugins/agentcompass-taubench/README.md": "/benchmarks/taubench.md",
    "plugins/agentcompass-report/README.md": "/guides/viewing.md",
    "plugins/agentcompass-ray/README.md": "/guides/cluster.md",
    "plugins/agentcompass-export/README.md": "/guides/exports.md",
    "plugins/agentcompass-otel/README.md": "/guides/exports.md",
    "plugins/agentcompass-example-interactive/README.md": "/benchmarks/examples.md",
    "plugins/agentcompass-example-coding/README.md": "/benchmarks/examples.md",
    "#in-other-tools-inspect-harbors-atif-opentelemetry": "/guides/exports.md",
    "#installed-agents": "/guides/agents.md",
    "#past-one-machine---executor-ray": "/guides/cluster.md",
    "#record-replay-and-the-model-call-cache": "/guides/replay.md",
    "#run-config-files": "/guides/running.md#run-config-files",
    "#swe-bench": "/benchmarks/swebench.md",
    "docs/report.png": "/report.png",
    "docs/leaderboard.png": "/leaderboard.png",
}


class DocsError(Exception):
    """A placeholder that cannot be filled (a heading or file that does not exist)."""


# -- README sections and files ---------------------------------------------------------------------------


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """``(line index, level, text)`` of every Markdown heading outside code blocks."""
    found, fenced = [], False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := _HEADING.match(line)):
            found.append((i, len(m.group(1)), m.group(2)))
    return found


def _lift(lines: list[str], by: int) -> list[str]:
    """Headings ``by`` levels higher (``###`` → ``##`` for 1), never above ``##`` (the page has its own title)."""
    out, fenced = [], False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := _HEADING.match(line)):
            line = "#" * max(2, len(m.group(1)) - by) + " " + m.group(2)
        out.append(line)
    return out


def readme_section(heading: str, text: str | None = None, *, intro: bool = False) -> str:
    """The body of the README section titled ``heading`` (up to the next heading of its level or higher; with
    ``intro``, up to its first sub-heading), its sub-headings lifted so that the first level under it is ``##``."""
    lines = (README.read_text() if text is None else text).splitlines()
    headings = _headings(lines)
    for n, (index, level, title) in enumerate(headings):
        if title == heading:
            end = next((i for i, lv, _ in headings[n + 1:] if intro or lv <= level), len(lines))
            return "\n".join(_lift(lines[index + 1:end], level - 1)).strip("\n") + "\n"
    raise DocsError(f"README.md has no heading {heading!r}")


def include_file(path: str) -> str:
    target = (ROOT / path).resolve()
    if not target.is_relative_to(ROOT) or not target.is_file():
        raise DocsError(f"include: {path} is not a file of the repository")
    return target.read_text()


def rewrite_links(markdown: str) -> str:
    """Links into the repository (``](plugins/x/README.md)``) made links to the site's pages."""
    for source, page in LINKS.items():
        markdown = markdown.replace(f"]({source})", f"]({page})").replace(f"]({source}#", f"]({page}#")
    return markdown


# -- the CLI reference ---------------------------------------------------------------------------------


def full_cli() -> click.Group:
    """The command line as ``agentcompass`` builds it: the core's commands and the installed plugins'."""
    from agentcompass.cli.main import cli
    from agentcompass.plugins import load_plugins

    load_plugins().add_commands(cli)
    return cli


def _commands(group: click.Group, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], click.Command]]:
    found: list[tuple[tuple[str, ...], click.Command]] = []
    for name in sorted(group.commands):
        command = group.commands[name]
        found.append(((*path, name), command))
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
    return found


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _option_row(ctx: click.Context, param: click.Parameter) -> str:
    flags = ", ".join(f"`{f}`" for f in [*param.opts, *param.secondary_opts])
    record = param.get_help_record(ctx)
    metavar = ""
    if isinstance(param, click.Option) and not param.is_flag:
        metavar = param.make_metavar(ctx) if hasattr(param, "make_metavar") else ""
    help_text = record[1] if record else ""
    return f"| {flags} | {_cell(metavar) and '`' + _cell(metavar) + '`'} | {_cell(help_text)} |"


def cli_reference(cli: click.Group | None = None) -> str:
    """Markdown: one section per command of ``cli`` (default :func:`full_cli`), each with its usage, help and a
    table of every option."""
    cli = cli or full_cli()
    parts = []
    root_ctx = click.Context(cli, info_name="agentcompass")
    parts.append(f"```\n{cli.get_usage(root_ctx)}\n```\n\n{cli.help or ''}\n")
    for path, command in _commands(cli, ("agentcompass",)):
        ctx = click.Context(command, info_name=" ".join(path))
        parts.append(f"## `{' '.join(path)}`\n")
        parts.append(f"```\n{command.get_usage(ctx)}\n```\n")
        if command.help:
            parts.append(click.unstyle(command.help).strip() + "\n")
        options = [p for p in command.get_params(ctx) if isinstance(p, click.Option)]
        if options:
            parts.append("| option | value | meaning |\n| --- | --- | --- |")
            parts.append("\n".join(_option_row(ctx, p) for p in options) + "\n")
    return "\n".join(parts)


# -- the API reference ---------------------------------------------------------------------------------


def api_reference() -> str:
    """A mkdocstrings block for every public module (then the test kit's), in order."""
    from agentcompass.runtime import PUBLIC_MODULES, TESTING_MODULES

    blocks = ["## The plugin's API\n"]
    blocks += [f"::: {module}\n    options:\n      show_root_heading: true\n" for module in sorted(PUBLIC_MODULES)]
    blocks.append("## The test kit (`agentcompass.testing`, for a plugin's tests)\n")
    blocks += [f"::: {module}\n    options:\n      show_root_heading: true\n" for module in sorted(TESTING_MODULES)]
    return "\n".join(blocks)


# -- the hook ------------------------------------------------------------------------------------------


def fill(markdown: str) -> str:
    """``markdown`` with every placeholder filled and repository links rewritten."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) == "cli-reference":
            return cli_reference()
        if match.group(1) == "api-reference":
            return api_reference()
        if match.group("heading"):
            return readme_section(match.group("heading").strip(), intro=bool(match.group("intro")))
        return include_file(match.group("path").strip())

    return rewrite_links(_PLACEHOLDER.sub(replace, markdown))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return fill(markdown)
