"""``agentcompass ctl RUN_DIR ACTION``: steer a run while it runs (:mod:`agentcompass.control`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentcompass.cli.common import emit_json
from agentcompass.cli.errors import CLIError, cli_errors


def _send(run_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    from agentcompass.control.client import send

    with cli_errors():
        return send(run_dir, request)


def status_lines(status: dict[str, Any]) -> list[str]:
    """``ctl status`` for a person: the state and figures, then what runs and what waits."""
    cost = f"  cost {status['cost_usd']:.4f} USD" + (f" of {status['max_cost']:g}" if status.get("max_cost") else "")
    lines = [f"{status['run_id']}: {status['state']}  finished {status['finished']}/{status['total']}  "
             f"running {len(status['running'])}  waiting {status['n_waiting']}  concurrency {status['concurrency']}  "
             f"stalled {status['stalled']}{cost}"]
    for r in status["running"]:
        lines.append(f"  running {r['task_id']} trial {r['trial']} attempt {r['attempt']}: {r['phase']} for "
                     f"{r['running_s']:.0f}s, last sign of life {r['quiet_s']:.0f}s ago ({r['last']})")
    shown = status["waiting"]
    for w in shown:
        lines.append(f"  waiting {w['task_id']} trial {w['trial']} attempt {w['attempt']}")
    if status["n_waiting"] > len(shown):
        lines.append(f"  ... and {status['n_waiting'] - len(shown)} more waiting")
    return lines


@click.group("ctl")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.pass_context
def ctl_group(ctx: click.Context, run_dir: Path) -> None:
    """Steer the run running in RUN_DIR: status, pause, resume, cancel, requeue, set, drain.

    Only the user who started the run may steer it; every action is logged in RUN_DIR/logs.jsonl and shown on
    the run's console.
    """
    ctx.obj = run_dir


def _act(ctx: click.Context, request: dict[str, Any]) -> None:
    reply = _send(ctx.obj, request)
    click.echo(reply["message"])


@ctl_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="The status as JSON.")
@click.pass_context
def ctl_status(ctx: click.Context, as_json: bool) -> None:
    """What runs, what waits, and the run's figures."""
    status = _send(ctx.obj, {"action": "status"})["status"]
    if as_json:
        emit_json(status)
        return
    click.echo("\n".join(status_lines(status)))


@ctl_group.command("pause")
@click.option("--now", is_flag=True, help="Also cancel the running attempts (each is queued again).")
@click.pass_context
def ctl_pause(ctx: click.Context, now: bool) -> None:
    """Start no new attempt (running ones go on, unless --now)."""
    _act(ctx, {"action": "pause", "now": now})


@ctl_group.command("resume")
@click.pass_context
def ctl_resume(ctx: click.Context) -> None:
    """Start attempts again after a pause."""
    _act(ctx, {"action": "resume"})


@ctl_group.command("cancel")
@click.argument("task")
@click.option("--trial", type=click.IntRange(min=1), default=None, help="Only this trial of the task.")
@click.pass_context
def ctl_cancel(ctx: click.Context, task: str, trial: int | None) -> None:
    """End TASK's waiting and running attempts (final status CANCELLED)."""
    _act(ctx, {"action": "cancel", "task": task, "trial": trial})


@ctl_group.command("requeue")
@click.argument("task")
@click.option("--trial", type=click.IntRange(min=1), default=None, help="Only this trial of the task.")
@click.pass_context
def ctl_requeue(ctx: click.Context, task: str, trial: int | None) -> None:
    """Run TASK again (a running attempt is cut; a finished one is kept as an earlier attempt)."""
    _act(ctx, {"action": "requeue", "task": task, "trial": trial})


@ctl_group.command("set")
@click.argument("setting", metavar="NAME=VALUE")
@click.pass_context
def ctl_set(ctx: click.Context, setting: str) -> None:
    """Change concurrency=N, max-cost=USD or timeout=SECONDS (the run phase of attempts that start from now)."""
    name, sep, value = setting.partition("=")
    if not sep or not value:
        raise CLIError(f"set takes NAME=VALUE (concurrency=4, max-cost=2.5, timeout=600), got {setting!r}")
    _act(ctx, {"action": "set", "name": name.strip(), "value": value.strip()})


@ctl_group.command("drain")
@click.pass_context
def ctl_drain(ctx: click.Context) -> None:
    """Start nothing more; end (interrupted, resumable) once the running attempts finish."""
    _act(ctx, {"action": "drain"})
