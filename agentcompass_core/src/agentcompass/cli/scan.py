"""``agentcompass scan RUN_DIR``: the scanner engine (:mod:`agentcompass.scanning`) over a finished run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentcompass.cli.common import emit_json, plugin_host
from agentcompass.cli.errors import cli_errors


def findings_table(findings: list[dict[str, Any]]) -> str:
    """One row per finding: scanner, task, trial, attempt, severity, reason, where and the excerpt."""
    from agentcompass.cli.render import table
    from agentcompass.runtime.shortening import shorten

    rows = []
    for f in findings:
        ev = (f.get("evidence") or [{}])[0]
        where = f"{ev.get('where', '')} {ev.get('index') if ev.get('index') is not None else ev.get('path') or ''}"
        rows.append([f["scanner"], f["task_id"], f.get("trial", 1), f.get("attempt", 1), f.get("severity", ""),
                     f.get("reason", ""), where.strip(), shorten(str(ev.get("excerpt", "")), 80)])
    return table(["scanner", "task_id", "trial", "attempt", "severity", "reason", "where", "evidence"], rows)


@click.command("scan")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--scanner", "scanners", multiple=True, metavar="NAME",
              help="A scanner to run (repeatable; default: every built-in but the judge): reward-hacking, "
                   "environment, refusal, gave-up, loop[:N], a plugin's.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON on stdout.")
@click.pass_context
def scan_command(ctx: click.Context, run_dir: Path, scanners: tuple[str, ...], as_json: bool) -> None:
    """Scan every final attempt of RUN_DIR and write the findings to RUN_DIR/scans.jsonl (and their counts to
    summary.json). Findings never change a score."""
    import asyncio
    import dataclasses

    from agentcompass.scanning.engine import build_scanners, scan_run

    host = plugin_host(ctx)
    with cli_errors():
        chosen = build_scanners(host, scanners)
        outcome = asyncio.run(scan_run(run_dir, chosen))
    found = [dataclasses.asdict(f) for f in outcome.findings]
    if as_json:
        emit_json(found)
        return
    names = ", ".join(s.name for s in chosen)
    click.echo(f"scanned {outcome.n_attempts} attempts of {run_dir} with {names} in {outcome.seconds:.1f} s: "
               f"{len(found)} findings (in {run_dir / 'scans.jsonl'})")
    if found:
        click.echo(findings_table(found))
