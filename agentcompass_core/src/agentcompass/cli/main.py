"""The ``agentcompass`` command: a thin click layer over the library.

Heavy modules (runner, gateway, rich) are imported inside the commands that need them, so that
``agentcompass plugins list`` starts fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from agentcompass import __version__
from agentcompass.cli.errors import CLIError, cli_errors, parse_pairs
from agentcompass.plugins import PluginHost, load_plugins


def plugin_host(ctx: click.Context, include_skipped: bool = False) -> PluginHost:
    """The plugins: the host the caller passed in ``obj`` (tests), else the installed ones."""
    obj = ctx.find_root().obj
    if isinstance(obj, dict) and obj.get("plugin_host") is not None:
        return obj["plugin_host"]
    return load_plugins(include_skipped=include_skipped)


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentcompass")
def cli() -> None:
    """Evaluate LLM agents: run a BENCHMARK with a HARNESS and a MODEL in an environment."""


# -- run -------------------------------------------------------------------------------------------------


@cli.command("run")
@click.argument("benchmark", required=False)
@click.argument("harness", required=False)
@click.argument("model", required=False)
@click.option("--env", "-e", "environment", default="local", show_default=True, help="Environment kind.")
@click.option("--env-arg", multiple=True, metavar="KEY=VALUE", help="Option for the environment.")
@click.option("--benchmark-arg", "-b", multiple=True, metavar="KEY=VALUE", help="Option for the benchmark.")
@click.option("--harness-arg", multiple=True, metavar="KEY=VALUE", help="Option for the harness.")
@click.option("--model-arg", "-m", multiple=True, metavar="KEY=VALUE", help="Generation setting of the model.")
@click.option("--user-model", default=None, help="Model for the user-simulator role.")
@click.option("--judge-model", default=None, help="Model for the judge role.")
@click.option("--concurrency", "-c", default=8, show_default=True, type=int, help="Tasks run at once.")
@click.option("--max-environments", default=None, type=int, help="Live environments at once (default: no bound "
              "beyond --concurrency).")
@click.option("--limit", "-n", default=None, type=int, help="Run only the first N tasks.")
@click.option("--task-id", "-t", "task_ids", multiple=True, help="Run only this task (repeatable).")
@click.option("--retries", default=0, show_default=True, type=int,
              help="Re-run an attempt after an infrastructure failure (environment start, timeout).")
@click.option("--timeout", default=None, type=float, help="Seconds for a task's run phase (default 3600).")
@click.option("--phase-timeout", multiple=True, metavar="PHASE=SECONDS",
              help="Seconds for one phase: environment, prepare, run, collect, evaluate, close.")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None,
              help="Run directory (default runs/RUN_ID).")
@click.option("--resume", type=click.Path(path_type=Path), default=None,
              help="Finish an interrupted run in this directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("--model-base-url", default=None, help="Base URL of the model's API (e.g. http://127.0.0.1:8000/v1 "
              "for vLLM); for openai also $OPENAI_BASE_URL.")
@click.option("--model-api-key-env", default=None, metavar="VAR",
              help="Environment variable holding the model's API key (openai: OPENAI_API_KEY; "
              "openai-compatible: none unless given).")
@click.option("--max-retries", default=5, show_default=True, type=click.IntRange(min=0),
              help="Retries of a model call on 429, 5xx, connection errors and timeouts.")
@click.option("--max-connections", default=64, show_default=True, type=click.IntRange(min=1),
              help="Concurrent HTTP connections per model provider.")
@click.option("--request-timeout", default=600.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds allowed per model request.")
@click.option("--max-tokens-per-task", default=None, type=click.IntRange(min=1),
              help="Stop a task (LIMIT_REACHED) once its agent and user models used this many tokens.")
@click.option("--max-cost", default=None, type=click.FloatRange(min=0, min_open=True), metavar="USD",
              help="Stop the run once its model calls cost this much (needs known prices).")
@click.option("--prices", default=None, type=click.Path(dir_okay=False), metavar="FILE",
              help="JSON price table (USD per 1M input/output tokens) extending the built-in one; "
              "also $AGENTCOMPASS_PRICES.")
@click.pass_context
def run_command(ctx: click.Context, benchmark: str | None, harness: str | None, model: str | None,
                environment: str, env_arg: tuple[str, ...], benchmark_arg: tuple[str, ...],
                harness_arg: tuple[str, ...], model_arg: tuple[str, ...], user_model: str | None,
                judge_model: str | None, concurrency: int, max_environments: int | None, limit: int | None,
                task_ids: tuple[str, ...], retries: int, timeout: float | None, phase_timeout: tuple[str, ...],
                output: Path | None, resume: Path | None, as_json: bool, model_base_url: str | None = None,
                model_api_key_env: str | None = None, max_retries: int = 5, max_connections: int = 64,
                request_timeout: float = 600.0, max_tokens_per_task: int | None = None,
                max_cost: float | None = None, prices: str | None = None) -> None:
    """Run BENCHMARK with HARNESS ('none' when the benchmark drives its own loop) and MODEL.

    Exit status: 0 when every task completed (whatever its score), 1 when any task ended in an error
    status, 2 for a usage error, 130 when interrupted.
    """
    import asyncio

    from agentcompass.cli.progress import Progress
    from agentcompass.runner import Runner
    from agentcompass.runtime.types import RunRequest

    if resume is None and not (benchmark and harness and model):
        raise CLIError("run needs BENCHMARK HARNESS MODEL (or --resume RUN_DIR); "
                       "e.g. agentcompass run example_interactive none mock", exit_code=2)
    if resume is not None and output is not None and output != resume:
        raise CLIError("--output and --resume name different directories; give only --resume", exit_code=2)
    timeouts: dict[str, float] = {}
    for key, value in parse_pairs(phase_timeout, "--phase-timeout").items():
        try:
            timeouts[key] = float(value)
        except ValueError:
            raise CLIError(f"--phase-timeout {key}={value!r}: seconds must be a number", exit_code=2) from None
    request = RunRequest(
        benchmark=benchmark or "",
        harness=harness or "",
        model=model or "",
        environment=environment,
        benchmark_args=parse_pairs(benchmark_arg, "--benchmark-arg"),
        harness_args=parse_pairs(harness_arg, "--harness-arg"),
        model_args=parse_pairs(model_arg, "--model-arg"),
        environment_args=parse_pairs(env_arg, "--env-arg"),
        role_models={k: v for k, v in {"user": user_model, "judge": judge_model}.items() if v},
        concurrency=concurrency,
        max_environments=max_environments,
        limit=limit,
        task_ids=task_ids,
        retries=retries,
        timeout=timeout,
        phase_timeouts=timeouts,
        model_base_url=model_base_url,
        model_api_key_env=model_api_key_env,
        max_retries=max_retries,
        max_connections=max_connections,
        request_timeout=request_timeout,
        max_tokens_per_task=max_tokens_per_task,
        max_cost=max_cost,
        prices=str(Path(prices).resolve()) if prices else None,
    )
    host = plugin_host(ctx)
    progress = Progress(enabled=True)
    runner = Runner(host, request, run_dir=resume or output, resume=resume is not None,
                    on_result=progress.task_done, on_start=progress.start)
    with cli_errors():
        try:
            outcome = asyncio.run(runner.run())
        except KeyboardInterrupt:
            progress.stop()
            click.echo("Interrupted before the run could record its state.", err=True)
            ctx.exit(130)
    progress.stop()
    summary = outcome.summary
    if as_json:
        _emit_json(summary)
    else:
        from agentcompass.cli.render import summary_text

        click.echo(summary_text(summary))
    if summary.get("stopped_reason"):
        click.echo(f"Stopped early: {summary['stopped_reason']}. Unrun tasks are kept for: agentcompass run "
                   f"--resume {outcome.run_dir}", err=True)
    if outcome.interrupted:
        click.echo(f"Interrupted; finished results are kept. Resume with: agentcompass run --resume "
                   f"{outcome.run_dir}", err=True)
    ctx.exit(outcome.exit_code)


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
    host = plugin_host(ctx, include_skipped=show_all)
    records = sorted(host.records.values(), key=lambda r: r.name)
    if as_json:
        _emit_json([r.to_json() for r in records])
        return
    from agentcompass.cli.render import table

    rows = []
    for r in records:
        provides = "; ".join(f"{k}: {', '.join(v)}" for k, v in r.registers.items())
        state = f"ERROR: {r.error}" if r.error else provides or ("skipped" if not r.loaded else "-")
        rows.append([r.name, r.version or "-", state])
    click.echo(table(["plugin", "version", "provides"], rows))


# -- tasks -----------------------------------------------------------------------------------------------


@cli.group("tasks")
def tasks_group() -> None:
    """Inspect a benchmark's tasks."""


@tasks_group.command("list")
@click.argument("benchmark")
@click.option("--benchmark-arg", "-b", multiple=True, metavar="KEY=VALUE")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def tasks_list(ctx: click.Context, benchmark: str, benchmark_arg: tuple[str, ...], as_json: bool) -> None:
    """List the tasks of BENCHMARK."""
    import asyncio

    from agentcompass.runner import construct_plugin, load_tasks
    from agentcompass.runtime.types import RunRequest

    host = plugin_host(ctx)
    args = parse_pairs(benchmark_arg, "--benchmark-arg")
    with cli_errors():
        bench = construct_plugin("benchmark", benchmark, host.factory("benchmark", benchmark), args)
        req = RunRequest(benchmark=benchmark, harness="", model="", benchmark_args=args)
        tasks = asyncio.run(load_tasks(bench, req))
    if as_json:
        _emit_json([{"task_id": t.task_id, "category": t.category} for t in tasks])
        return
    from agentcompass.cli.render import table

    click.echo(table(["task_id", "category"], [[t.task_id, t.category or "-"] for t in tasks]))
    click.echo(f"{len(tasks)} tasks")


# -- results ---------------------------------------------------------------------------------------------


@cli.group("results")
def results_group() -> None:
    """Inspect run directories."""


@results_group.command("show")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True)
@click.option("--tasks", "show_tasks", is_flag=True, help="Also list every task's final status.")
def results_show(run_dir: Path, as_json: bool, show_tasks: bool) -> None:
    """Show the summary (and per-task results) of RUN_DIR."""
    from agentcompass.results.run_dir import RunDirectory

    with cli_errors():
        store = RunDirectory.open_existing(run_dir)
        summary = store.read_summary()
        results = store.final_results()
    if summary is None:
        raise CLIError(f"{run_dir} has no summary.json yet (the run is still going or was killed); "
                       f"finish it with: agentcompass run --resume {run_dir}", exit_code=2)
    if as_json:
        data = dict(summary)
        if show_tasks:
            from agentcompass.serialization import unstructure

            data["tasks"] = [unstructure(r) for r in results.values()]
        _emit_json(data)
        return
    from agentcompass.cli.render import summary_text, table

    click.echo(summary_text(summary))
    if show_tasks:
        rows = [[r.task_id, r.status.value, ", ".join(f"{k}={v:g}" for k, v in r.metrics.items()),
                 (r.error or "")[:80]] for r in results.values()]
        click.echo(table(["task_id", "status", "metrics", "error"], rows))


# -- env -------------------------------------------------------------------------------------------------


@cli.group("env")
def env_group() -> None:
    """Manage environments."""


@env_group.command("prune")
@click.option("--env", "-e", "environment", default="docker", show_default=True)
@click.option("--run-id", default=None, help="Only what this run left behind.")
@click.pass_context
def env_prune(ctx: click.Context, environment: str, run_id: str | None) -> None:
    """Remove environments that killed runs left behind."""
    import asyncio

    host = plugin_host(ctx)
    with cli_errors():
        provider = host.factory("environment", environment)()
        removed = asyncio.run(provider.prune(run_id))
    scope = f"run {run_id}" if run_id else "all runs"
    click.echo(f"removed {removed} {environment} environment(s) of {scope}")


def main() -> None:
    try:
        cli(prog_name="agentcompass")
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
