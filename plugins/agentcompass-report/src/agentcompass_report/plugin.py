"""Entry point of agentcompass-report: the ``report`` and ``view`` commands (``register_commands``).

Imports stay inside the commands, so that every start of ``agentcompass`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import click
from agentcompass import hookimpl

#: Exit status of bad input (a missing or damaged run directory, a bad option), as the core's commands use.
USAGE_EXIT = 2


class ReportError(click.ClickException):
    """One line on stderr, no traceback."""

    exit_code = USAGE_EXIT

    def show(self, file=None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


def _redactor(paths: tuple[Path, ...], secrets_env: tuple[str, ...]):
    import json
    import os

    from agentcompass_report.secrets import make_redactor

    requests = []
    for p in paths:
        try:
            requests.append(json.loads((p / "run.json").read_text(encoding="utf-8")).get("request") or {})
        except (OSError, ValueError, AttributeError):
            continue  # opening the run reports what is wrong with it
    missing = [name for name in secrets_env if not os.environ.get(name)]
    if missing:
        raise ReportError(f"--secret-env names {', '.join('$' + m for m in missing)}, which is not set")
    return make_redactor(requests, extra=[os.environ[name] for name in secrets_env])


_SECRET_ENV = click.option(
    "--secret-env", "secrets_env", multiple=True, metavar="VAR",
    help="Also mask the value of this environment variable (repeatable). Keys in *_API_KEY/*_TOKEN variables "
         "and the credentials file are masked anyway.")


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Where to write the page (default RUN_DIR/report.html).")
@click.option("--max-text", type=click.IntRange(min=100), default=None,
              help="Characters kept of each message in a trajectory (default 4000).")
@click.option("--max-trajectory", type=click.IntRange(min=1000), default=None,
              help="Characters kept of each task's trajectory (default 60000).")
@click.option("--baseline", default=None, metavar="CELL",
              help="Suite directory only: the cell the leaderboard's differences are against.")
@_SECRET_ENV
def report_command(run_dirs: tuple[Path, ...], output: Path | None, max_text: int | None,
                   max_trajectory: int | None, baseline: str | None, secrets_env: tuple[str, ...]) -> None:
    """Write one self-contained HTML page of RUN_DIR (several: compared with the first).

    A suite directory (agentcompass suite run) gets its leaderboard page (SUITE_DIR/report.html), and each of
    its cells its own run report (SUITE_DIR/CELL/report.html, which the leaderboard links to).

    A validate directory (agentcompass validate -o DIR) gets its validity page (DIR/report.html: per task the
    oracle's and nop's verdicts, what is wrong, flip rate, times), and its two runs their reports.

    The page needs no network: open it in any browser. Long trajectories are cut to fit (the page says what).
    """
    import dataclasses

    from agentcompass.errors import AgentCompassError

    from agentcompass_report.conversation import REPORT_CAPS
    from agentcompass_report.report import build_report

    caps = dataclasses.replace(REPORT_CAPS, **{k: v for k, v in (("text", max_text), ("total", max_trajectory))
                                               if v is not None})
    redactor = _redactor(run_dirs, secrets_env)
    if len(run_dirs) == 1 and _is_suite(run_dirs[0]):
        _suite_report(run_dirs[0], output, caps, secrets_env, baseline)
        return
    if len(run_dirs) == 1 and _is_validate(run_dirs[0]):
        _validate_report(run_dirs[0], output, caps, secrets_env)
        return
    try:
        html, warnings = build_report(run_dirs, redactor, caps)
    except AgentCompassError as exc:
        raise ReportError(str(exc)) from None
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    target = output or run_dirs[0] / "report.html"
    try:
        target.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"cannot write {target}: {exc.strerror or exc}; choose another --output") from None
    click.echo(f"wrote {target} ({len(html.encode('utf-8')) / 1e6:.1f} MB); open it in a browser")


def _is_suite(path: Path) -> bool:
    from agentcompass.runtime.run_reader import is_suite_directory

    return is_suite_directory(path)


def _is_validate(path: Path) -> bool:
    from agentcompass.runtime.run_reader import is_validate_directory

    return is_validate_directory(path)


def _validate_report(path: Path, output: Path | None, caps, secrets_env: tuple[str, ...]) -> None:
    """The validity page, and the report of each of its runs (``oracle/``, ``nop/``), which the page links to."""
    from agentcompass.errors import AgentCompassError

    from agentcompass_report.report import build_report
    from agentcompass_report.validity import validity_page

    runs = [path / phase for phase in ("oracle", "nop") if (path / phase / "run.json").is_file()]
    for run in runs:
        try:
            html, warnings = build_report([run], _redactor((run,), secrets_env), caps)
        except AgentCompassError as exc:
            click.echo(f"warning: {run.name}: no report: {exc}", err=True)
            continue
        for warning in warnings:
            click.echo(f"warning: {run.name}: {warning}", err=True)
        _write(run / "report.html", html)
    try:
        html = validity_page(path, _redactor(tuple(runs), secrets_env))
    except AgentCompassError as exc:
        raise ReportError(str(exc)) from None
    target = output or path / "report.html"
    _write(target, html)
    click.echo(f"wrote {target} (the validity of every task; the reports of {', '.join(r.name for r in runs)} "
               "beside it); open it in a browser")


def _write(target: Path, html: str) -> None:
    try:
        target.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"cannot write {target}: {exc.strerror or exc}; choose another --output") from None


def _suite_report(path: Path, output: Path | None, caps, secrets_env: tuple[str, ...],
                  baseline: str | None) -> None:
    """The leaderboard page, and each cell's run report (rewritten when the run changed since)."""
    from agentcompass.errors import AgentCompassError

    from agentcompass_report.leaderboard import leaderboard_page
    from agentcompass_report.report import build_report

    cells = sorted(p for p in path.iterdir() if (p / "run.json").is_file())
    written = 0
    for cell in cells:
        target = cell / "report.html"
        newest = max((f.stat().st_mtime for f in cell.iterdir() if f.suffix in (".json", ".jsonl")), default=0.0)
        if target.exists() and target.stat().st_mtime >= newest:
            continue
        try:
            html, warnings = build_report([cell], _redactor((cell,), secrets_env), caps)
        except AgentCompassError as exc:
            click.echo(f"warning: {cell.name}: no report: {exc}", err=True)
            continue
        for warning in warnings:
            click.echo(f"warning: {cell.name}: {warning}", err=True)
        _write(target, html)
        written += 1
    try:
        html, warnings = leaderboard_page(path, _redactor(tuple(cells), secrets_env), baseline)
    except AgentCompassError as exc:
        raise ReportError(str(exc)) from None
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    target = output or path / "report.html"
    _write(target, html)
    click.echo(f"wrote {target} (the leaderboard of {len(cells)} cells; {written} cell report(s) written, "
               f"{len(cells) - written} up to date); open it in a browser")


@click.command("view")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback only, "
              "unless --allow-remote).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="Port (default: a free one).")
@click.option("--allow-remote", is_flag=True, help="Allow a --host that is not a loopback address.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
@_SECRET_ENV
def view_command(run_dirs: tuple[Path, ...], host: str, port: int, allow_remote: bool, open_browser: bool,
                 secrets_env: tuple[str, ...]) -> None:
    """Serve the page of RUN_DIR on this machine, refreshed as results arrive (during a run too).

    Stop with Ctrl-C.
    """
    import asyncio
    import contextlib

    from agentcompass.errors import AgentCompassError

    from agentcompass_report.server import ViewState, check_host, is_loopback, open_runs, serve

    try:
        check_host(host, allow_remote)
        runs = open_runs(run_dirs)
    except AgentCompassError as exc:
        raise ReportError(str(exc)) from None
    redactor = _redactor(run_dirs, secrets_env)

    def ready(url: str) -> None:
        click.echo(f"serving {', '.join(str(p) for p in run_dirs)} at {url} (Ctrl-C to stop)", err=True)
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    async def main() -> None:
        import secrets

        # Steering buttons only on loopback: nobody else may pause or drain this user's run through the page.
        token = secrets.token_hex(16) if is_loopback(host) else None
        await serve(ViewState(runs, redactor, control_token=token), host, port, ready)

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(main())
    except OSError as exc:
        raise ReportError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port") from None


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(report_command)
    cli.add_command(view_command)
