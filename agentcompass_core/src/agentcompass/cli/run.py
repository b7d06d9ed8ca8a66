"""``agentcompass run``: the command-line face of :class:`~agentcompass.runner.Runner`.

Each option maps to the :class:`~agentcompass.runtime.RunRequest` field of the same name, and its default is
that field's default: the request is the one place defaults are written.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import click

from agentcompass.cli.common import emit_json, plugin_host
from agentcompass.cli.errors import CLIError, cli_errors, parse_pairs
from agentcompass.exit_codes import ExitCode
from agentcompass.runtime.types import RunRequest

#: Set (to ``1``) by ``run --otel``: the ``otel`` plugin (agentcompass-otel) traces runs while it is set.
OTEL_ENV = "AGENTCOMPASS_OTEL"
#: The entry-point name of the plugin ``--otel`` needs.
OTEL_PLUGIN = "otel"

DEFAULTS = RunRequest(benchmark="", harness="", model="")
REQUEST_FIELDS = frozenset(f.name for f in fields(RunRequest))

#: ``(field, click option declarations, extra click keywords)``. Options of KEY=VALUE pairs end in ``_args``.
RUN_OPTIONS: list[tuple[str, tuple[str, ...], dict[str, Any]]] = [
    ("environment", ("--env", "-e"), {"help": "Environment kind (local, docker, ...)."}),
    ("environment_args", ("--env-arg",), {"help": "Option for the environment."}),
    ("benchmark_args", ("--benchmark-arg", "-b"), {"help": "Option for the benchmark."}),
    ("harness_args", ("--harness-arg",), {"help": "Option for the harness."}),
    ("model_args", ("--model-arg", "-m"), {"help": "Generation setting or option of the agent's model."}),
    ("model_aliases", ("--model-alias",),
     {"metavar": "NAME=ROLE",
      "help": "Route the model NAME an agent asks for (claude-haiku-4-5, ...) to ROLE (agent, user, judge); "
              "unknown names go to the agent role."}),
    ("executor", ("--executor",), {"help": "Where attempts run (see 'agentcompass plugins list')."}),
    ("executor_args", ("--executor-arg",), {"help": "Option for the executor."}),
    ("gateway_host", ("--gateway-host",),
     {"help": "Address the model gateway listens on; a non-loopback one (0.0.0.0) lets workers on other "
              "machines reach it (--executor ray), with per-attempt tokens."}),
    ("trials", ("--trials",), {"type": int, "help": "Runs of each task; with --resume, more extends a run."}),
    ("seed", ("--seed",), {"type": int, "help": "The run's seed (default: a fresh one, recorded in run.json)."}),
    ("concurrency", ("--concurrency", "-c"), {"type": int, "help": "Tasks run at once."}),
    ("max_environments", ("--max-environments",),
     {"type": int, "help": "Live environments at once (default: no bound beyond --concurrency)."}),
    ("limit", ("--limit", "-n"), {"type": int, "help": "Run only the first N tasks."}),
    ("task_ids", ("--task-id", "-t"), {"multiple": True, "help": "Run only this task (repeatable)."}),
    ("retries", ("--retries",),
     {"type": int, "help": "Re-run an attempt after an infrastructure failure (environment start, timeout)."}),
    ("timeout", ("--timeout",), {"type": float, "help": "Seconds for a task's run phase (default 3600)."}),
    ("phase_timeouts", ("--phase-timeout",),
     {"metavar": "PHASE=SECONDS",
      "help": "Seconds for one phase: environment, prepare, run, collect, evaluate, close."}),
    ("model_base_url", ("--model-base-url",),
     {"help": "Base URL of the model's API (e.g. http://127.0.0.1:8000/v1 for vLLM); for openai also "
              "$OPENAI_BASE_URL."}),
    ("model_api_key_env", ("--model-api-key-env",),
     {"metavar": "VAR", "help": "Environment variable holding the model's API key (openai: OPENAI_API_KEY; "
                                "openai-compatible: none unless given)."}),
    ("max_retries", ("--max-retries",),
     {"type": click.IntRange(min=0), "help": "Retries of a model call on 429, 5xx, connection errors and timeouts."}),
    ("max_connections", ("--max-connections",),
     {"type": click.IntRange(min=1), "help": "Concurrent HTTP connections per model provider."}),
    ("request_timeout", ("--request-timeout",),
     {"type": click.FloatRange(min=0, min_open=True), "help": "Seconds allowed per model request."}),
    ("max_tokens_per_task", ("--max-tokens-per-task",),
     {"type": click.IntRange(min=1),
      "help": "Stop a task (LIMIT_REACHED) once its agent and user models used this many tokens."}),
    ("max_cost", ("--max-cost",),
     {"type": click.FloatRange(min=0, min_open=True), "metavar": "USD",
      "help": "Stop the run once its model calls cost this much (needs known prices)."}),
    ("secret_env", ("--secret-env",),
     {"multiple": True, "metavar": "VAR",
      "help": "Mask this variable's value in everything the run writes (repeatable); credential-named "
              "variables (*_API_KEY, *_TOKEN, *_SECRET, ...) are masked without it."}),
    ("prices", ("--prices",),
     {"type": click.Path(dir_okay=False), "metavar": "FILE",
      "help": "JSON price table (USD per 1M input/output tokens) extending the built-in one; also "
              "$AGENTCOMPASS_PRICES."}),
]


def _pairs_option(field: str) -> bool:
    return field.endswith("_args") or field in ("phase_timeouts", "model_aliases")


def run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Apply every option of :data:`RUN_OPTIONS`, each defaulting to its request field's default."""
    for field, decls, extra in reversed(RUN_OPTIONS):
        assert field in REQUEST_FIELDS, field
        kwargs = dict(extra)
        if _pairs_option(field):
            kwargs.update(multiple=True, metavar=kwargs.get("metavar", "KEY=VALUE"))
        elif not kwargs.get("multiple"):
            default = getattr(DEFAULTS, field)
            kwargs.update(default=default, show_default=default is not None and default != "")
        command = click.option(*decls, field, **kwargs)(command)
    return command


def enable_otel(host: Any) -> None:
    """``--otel``: tell the ``otel`` plugin to trace this process's runs; a clear error when it is missing."""
    import os

    record = host.records.get(OTEL_PLUGIN)
    if record is None or not record.loaded:
        why = f" (it failed to load: {record.error})" if record is not None and record.error else ""
        raise CLIError(f"--otel needs the agentcompass-otel plugin{why}; install it (pip install "
                       "agentcompass-otel) and check 'agentcompass plugins list'")
    os.environ[OTEL_ENV] = "1"


def _ignore_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def given_options(ctx: click.Context) -> frozenset[str]:
    """The request fields the user set on the command line (not left at their defaults)."""
    return frozenset(field for field, _, _ in RUN_OPTIONS
                     if ctx.get_parameter_source(field) not in (None, click.core.ParameterSource.DEFAULT))


def request_from_options(benchmark: str, harness: str, model: str, user_model: str | None,
                         judge_model: str | None, options: dict[str, Any]) -> RunRequest:
    values: dict[str, Any] = {}
    for field, decls, _ in RUN_OPTIONS:
        value = options[field]
        if _pairs_option(field):
            value = parse_pairs(value, decls[0])
        values[field] = value
    timeouts: dict[str, float] = {}
    for key, value in values["phase_timeouts"].items():
        try:
            timeouts[key] = float(value)
        except ValueError:
            raise CLIError(f"--phase-timeout {key}={value!r}: seconds must be a number") from None
    values["phase_timeouts"] = timeouts
    values["task_ids"] = tuple(values["task_ids"])
    values["secret_env"] = tuple(values["secret_env"])
    if values["prices"]:
        values["prices"] = str(Path(values["prices"]).resolve())
    return RunRequest(
        benchmark=benchmark, harness=harness, model=model,
        role_models={k: v for k, v in {"user": user_model, "judge": judge_model}.items() if v},
        **values,
    )


@click.command("run")
@click.argument("benchmark", required=False)
@click.argument("harness", required=False)
@click.argument("model", required=False)
@click.option("--user-model", default=None, help="Model for the user-simulator role.")
@click.option("--judge-model", default=None, help="Model for the judge role.")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None,
              help="Run directory (default runs/RUN_ID).")
@click.option("--resume", type=click.Path(path_type=Path), default=None,
              help="Finish an interrupted run in this directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("--task-lines", is_flag=True,
              help="Print one line per finished task (the default when stderr is not a terminal; on a terminal "
                   "a live status line is shown instead).")
@click.option("--otel", is_flag=True,
              help="Export OpenTelemetry traces of the run over OTLP (the agentcompass-otel plugin; endpoint and "
                   "protocol from $OTEL_EXPORTER_OTLP_*). Same as AGENTCOMPASS_OTEL=1.")
@run_options
@click.pass_context
def run_command(ctx: click.Context, benchmark: str | None, harness: str | None, model: str | None,
                user_model: str | None, judge_model: str | None, output: Path | None, resume: Path | None,
                as_json: bool, task_lines: bool, otel: bool, **options: Any) -> None:
    """Run BENCHMARK with HARNESS ('none' when the benchmark drives its own loop) and MODEL.

    Exit status: 0 when every task completed (whatever its score), 1 when any task ended in an error
    status, 2 for a usage error, 3 when the run cannot be set up here (no engine, unwritable output),
    130 when interrupted.
    """
    import asyncio

    from agentcompass.cli.progress import Progress
    from agentcompass.runner import Runner

    if resume is None and not (benchmark and harness and model):
        raise CLIError("run needs BENCHMARK HARNESS MODEL (or --resume RUN_DIR); "
                       "e.g. agentcompass run example_interactive none mock")
    if resume is not None and output is not None and output != resume:
        raise CLIError("--output and --resume name different directories; give only --resume")
    request = request_from_options(benchmark or "", harness or "", model or "", user_model, judge_model, options)
    host = plugin_host(ctx)
    if otel:
        enable_otel(host)
    progress = Progress(enabled=True, task_lines=task_lines)
    signals_seen: list[str] = []

    def on_signal(name: str, count: int) -> None:
        signals_seen.append(name)
        progress.stop()
        if count == 1:
            click.echo(f"{name}: stopping; closing environments and keeping finished results…", err=True)
        else:
            click.echo(f"{name}: still stopping; the clean-up finishes on its own (it cannot be skipped)", err=True)

    runner = Runner(host, request, run_dir=resume or output, resume=resume is not None,
                    on_result=progress.task_done, on_start=progress.start, on_signal=on_signal,
                    given=given_options(ctx) | ({'role_models'} if user_model or judge_model else set()),
                    on_warning=lambda w: click.echo(f"warning: {w}", err=True))
    with cli_errors():
        try:
            outcome = asyncio.run(runner.run())
        except KeyboardInterrupt:  # a Ctrl-C outside the run's own handling: before it started, or as it closed
            _ignore_signals()
            progress.stop()
            click.echo("Interrupted; finished results are kept (resume with agentcompass run --resume RUN_DIR)."
                       if signals_seen else "Interrupted before the run started; nothing was recorded.", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
    if signals_seen or outcome.interrupted:
        _ignore_signals()  # the run is over and recorded: a late Ctrl-C must not turn exit 130 into a kill
    progress.stop()
    summary = outcome.summary
    if as_json:
        from agentcompass.serialization import unstructure

        emit_json(unstructure(summary))
    else:
        from agentcompass.cli.render import summary_text

        click.echo(summary_text(summary))
    if summary.stopped_reason:
        click.echo(f"Stopped early: {summary.stopped_reason}. Unrun tasks are kept for: agentcompass run "
                   f"--resume {outcome.run_dir}", err=True)
    if outcome.interrupted:
        click.echo(f"Interrupted; finished results are kept. Resume with: agentcompass run --resume "
                   f"{outcome.run_dir}", err=True)
    ctx.exit(outcome.exit_code)
