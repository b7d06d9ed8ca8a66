"""``agentcompass scan RUN_DIR``: the scanner engine (:mod:`agentcompass.scanning`) over a finished run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agentcompass.cli.common import emit_json, plugin_host
from agentcompass.cli.errors import cli_errors

if TYPE_CHECKING:
    from agentcompass.runtime.scanning import Scanner
    from agentcompass.runtime.types import RunRequest
    from agentcompass.scanning.engine import ScanOutcome


def scan_with(host: Any, run_dir: Path, specs: Sequence[str], judge_request: RunRequest | None,
              replay: Path | None = None) -> tuple[ScanOutcome, list[Scanner]]:
    """Scan ``run_dir`` with the scanners ``specs`` name; a ``judge:RUBRIC`` asks ``judge_request``'s judge role
    (its clients closed when the scan ends) or, given ``replay``, is answered from the judge calls recorded
    there, offline."""
    import asyncio

    from agentcompass.runtime.models import ModelClient
    from agentcompass.scanning.engine import build_scanners, scan_run, split
    from agentcompass.scanning.judge import JudgeScanner, judge_client
    from agentcompass.scanning.names import JUDGE

    judge: ModelClient | None = None
    live: list[ModelClient] = []
    source = None
    if any(split(s)[0] == JUDGE for s in specs):
        if replay is not None:
            from agentcompass.scanning.judge_replay import judge_replay

            source, judge = judge_replay(replay)
        elif judge_request is not None:
            judge, live = judge_client(host, judge_request)
    chosen = build_scanners(host, specs, judge)
    for scanner in chosen:
        if isinstance(scanner, JudgeScanner):
            scanner.replay = source

    async def scanning() -> ScanOutcome:
        try:
            return await scan_run(run_dir, chosen)
        finally:
            for client in live:
                await client.aclose()

    return asyncio.run(scanning()), chosen


def judge_logs(scanners: Sequence[Scanner]) -> list[Any]:
    """The call logs of the judge scanners among ``scanners`` (what they asked, metered)."""
    from agentcompass.scanning.judge import JudgeScanner

    return [s.on_meter for s in scanners if isinstance(s, JudgeScanner) and s.on_meter is not None]


def judge_lines(scanners: Sequence[Scanner]) -> list[str]:
    """``judge: N calls (M from the cache), ... tokens`` of each judge scanner that asked."""
    lines = []
    for log in judge_logs(scanners):
        replayed = f", {log.replayed} replayed" if log.replayed else ""
        lines.append(f"judge: {log.calls} calls ({log.cached} from the cache{replayed}), {log.prompt_tokens} prompt "
                     f"and {log.completion_tokens} completion tokens (in {log.path})")
    return lines


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
@click.option("--judge-model", metavar="MODEL", help="The model judge:RUBRIC.md asks (PROVIDER/NAME).")
@click.option("--model-base-url", metavar="URL", help="The judge model's endpoint (an OpenAI-compatible server).")
@click.option("--model-api-key-env", metavar="VAR", help="The variable holding the judge model's key.")
@click.option("--cache", metavar="DIR", help="Answer the judge's calls from this model-answer cache when it holds "
                                             "them, storing the others (a second scan then asks no model).")
@click.option("--cache-expiry", metavar="AGE", help="How old a cached answer may be (seconds, 30m, 12h, 7d).")
@click.option("--replay", type=click.Path(path_type=Path), metavar="RECORDING",
              help="Answer the judge's calls from those a judge scan recorded in RECORDING (a run directory with "
                   "scan_calls.jsonl; RUN_DIR itself to scan again), offline: no --judge-model needed, and a call "
                   "not recorded stops the scan.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON on stdout.")
@click.pass_context
def scan_command(ctx: click.Context, run_dir: Path, scanners: tuple[str, ...], judge_model: str | None,
                 model_base_url: str | None, model_api_key_env: str | None, cache: str | None,
                 cache_expiry: str | None, replay: Path | None, as_json: bool) -> None:
    """Scan every final attempt of RUN_DIR and write the findings to RUN_DIR/scans.jsonl (and their counts to
    summary.json). Findings never change a score. judge:RUBRIC.md asks --judge-model about each attempt; its
    calls are metered into RUN_DIR/scan_calls.jsonl."""
    import dataclasses

    from agentcompass.scanning.judge import scan_request

    host = plugin_host(ctx)
    with cli_errors():
        request = scan_request(judge_model, base_url=model_base_url, api_key_env=model_api_key_env, cache=cache,
                               cache_expiry=cache_expiry) if judge_model else None
        outcome, chosen = scan_with(host, run_dir, scanners, request, replay)
    found = [dataclasses.asdict(f) for f in outcome.findings]
    if as_json:
        emit_json(found)
        return
    names = ", ".join(s.name for s in chosen)
    click.echo(f"scanned {outcome.n_attempts} attempts of {run_dir} with {names} in {outcome.seconds:.1f} s: "
               f"{len(found)} findings (in {run_dir / 'scans.jsonl'})")
    for line in judge_lines(chosen):
        click.echo(line)
    if found:
        click.echo(findings_table(found))
