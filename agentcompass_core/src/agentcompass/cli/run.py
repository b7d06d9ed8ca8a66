"""``agentcompass run``: the command-line face of :class:`~agentcompass.runner.Runner`.

Each option maps to the :class:`~agentcompass.runtime.RunRequest` field of the same name, and its default is
that field's default: the request is the one place defaults are written.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from agentcompass.cli.common import emit_json, observing, plugin_host
from agentcompass.cli.errors import CLIError, cli_errors, parse_pairs
from agentcompass.exit_codes import ExitCode
from agentcompass.run_config import (
    OPTION_KEYS,
    RunConfig,
    RunOptions,
    load_run_config,
    option_flag,
    plugin_version_changes,
)
from agentcompass.runtime.types import RunRequest

#: Set (to ``1``) by ``run --otel``: the ``otel`` plugin (agentcompass-otel) traces runs while it is set.
OTEL_ENV = "AGENTCOMPASS_OTEL"
#: The entry-point name of the plugin ``--otel`` needs.
OTEL_PLUGIN = "otel"

DEFAULTS = RunRequest(benchmark="", harness="", model="")

#: ``(option key, short flags, extra click keywords)``: the long flag is the key's (:func:`option_flag`), the
#: default the request field's. Tables (``*_args``, ``phase_timeouts``, ``model_aliases``) are KEY=VALUE options.
RUN_OPTIONS: list[tuple[str, tuple[str, ...], dict[str, Any]]] = [
    ("env", ("-e",), {"help": "Environment kind (local, docker, ...)."}),
    ("env_args", (), {"help": "Option for the environment."}),
    ("benchmark_args", ("-b",), {"help": "Option for the benchmark."}),
    ("harness_args", (), {"help": "Option for the harness."}),
    ("model_args", ("-m",), {"help": "Generation setting or option of the agent's model."}),
    ("model_aliases", (),
     {"metavar": "NAME=ROLE",
      "help": "Route the model NAME an agent asks for (claude-haiku-4-5, ...) to ROLE (agent, user, judge); "
              "unknown names go to the agent role."}),
    ("executor", (), {"help": "Where attempts run (see 'agentcompass plugins list')."}),
    ("executor_args", (), {"help": "Option for the executor."}),
    ("gateway_host", (),
     {"help": "Address the model gateway listens on; a non-loopback one (0.0.0.0) lets workers on other "
              "machines reach it (--executor ray), with per-attempt tokens."}),
    ("trials", (), {"type": int, "help": "Runs of each task; with --resume, more extends a run."}),
    ("seed", (), {"type": int, "help": "The run's seed (default: a fresh one, recorded in run.json)."}),
    ("concurrency", ("-c",), {"type": int, "help": "Tasks run at once."}),
    ("max_environments", (),
     {"type": int, "help": "Live environments at once (default: no bound beyond --concurrency)."}),
    ("limit", ("-n",), {"type": int, "help": "Run only the first N tasks."}),
    ("task_ids", ("-t",), {"multiple": True, "help": "Run only this task (repeatable)."}),
    ("retries", (),
     {"type": int, "help": "Re-run an attempt after an infrastructure failure (environment start, timeout)."}),
    ("timeout", (), {"type": float, "help": "Seconds for a task's run phase (default 3600)."}),
    ("stall_timeout", (),
     {"type": float, "metavar": "SECONDS",
      "help": "Stop an attempt that shows no sign of life (no model call, no output, no phase change) for this "
              "long, as an infrastructure error retried under --retries (default per phase: prepare 1800, run 900, "
              "collect 600, evaluate 1800)."}),
    ("phase_timeouts", (),
     {"metavar": "PHASE=SECONDS",
      "help": "Seconds for one phase: environment, prepare, run, collect, evaluate, close."}),
    ("model_base_url", (),
     {"help": "Base URL of the agent model's API (e.g. http://127.0.0.1:8000/v1 for vLLM); for openai also "
              "$OPENAI_BASE_URL. Other roles: [models.ROLE] base_url in a --config file."}),
    ("model_api_key_env", (),
     {"metavar": "VAR", "help": "Environment variable holding the model's API key (openai: OPENAI_API_KEY; "
                                "openai-compatible: none unless given)."}),
    ("max_retries", (),
     {"type": click.IntRange(min=0), "help": "Retries of a model call on 429, 5xx, connection errors and timeouts."}),
    ("max_connections", (),
     {"type": click.IntRange(min=1), "help": "Concurrent HTTP connections per model provider."}),
    ("request_timeout", (),
     {"type": click.FloatRange(min=0, min_open=True), "help": "Seconds allowed per model request."}),
    ("max_tokens_per_task", (),
     {"type": click.IntRange(min=1),
      "help": "Stop a task (LIMIT_REACHED) once its agent and user models used this many tokens."}),
    ("max_cost", (),
     {"type": click.FloatRange(min=0, min_open=True), "metavar": "USD",
      "help": "Stop the run once its model calls cost this much (needs known prices)."}),
    ("secret_env", (),
     {"multiple": True, "metavar": "VAR",
      "help": "Mask this variable's value in everything the run writes (repeatable); credential-named "
              "variables (*_API_KEY, *_TOKEN, *_SECRET, ...) are masked without it."}),
    ("replay", (),
     {"metavar": "RUN_DIR",
      "help": "Answer every model call from this recorded run (no provider needed); a call it does not hold "
              "fails its task naming the first difference."}),
    ("replay_miss", (),
     {"type": click.Choice(["error", "live"]),
      "help": "What a replayed call missing from the recording does: fail its task, or go to the live model."}),
    ("replay_latency", (),
     {"is_flag": True, "help": "Replay each call after its recorded latency (default: at once)."}),
    ("cache", (),
     {"metavar": "DIR", "help": "Answer repeated model calls from this cache directory (shared across runs)."}),
    ("cache_expiry", (),
     {"metavar": "AGE", "help": "Ignore cache entries older than AGE (seconds, or 30m, 12h, 7d)."}),
    ("faults", (),
     {"metavar": "PROFILE",
      "help": "Inject faults into every model call (429s, 5xx, resets, timeouts, latency, cut streams, bad "
              "tool JSON, empty answers): a TOML profile or flaky-api, slow-api, cut-streams, bad-tool-json."}),
    ("prices", (),
     {"type": click.Path(dir_okay=False), "metavar": "FILE",
      "help": "JSON price table (USD per 1M input/output tokens) extending the built-in one; also "
              "$AGENTCOMPASS_PRICES."}),
]


def _pairs_option(key: str) -> bool:
    return key.endswith("_args") or key in ("phase_timeouts", "model_aliases")


def run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Apply every option of :data:`RUN_OPTIONS`, each defaulting to its request field's default."""
    for key, short, extra in reversed(RUN_OPTIONS):
        field = OPTION_KEYS[key]
        kwargs = dict(extra)
        if _pairs_option(key):
            kwargs.update(multiple=True, metavar=kwargs.get("metavar", "KEY=VALUE"))
        elif not kwargs.get("multiple"):
            default = DEFAULTS.option(field)
            kwargs.update(default=default, show_default=default is not None and default != "")
        command = click.option(option_flag(key), *short, key, **kwargs)(command)
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
    host.refresh_observers(OTEL_PLUGIN)  # it registered no observer while tracing was off


def scan_observer(host: Any, names: tuple[str, ...]) -> Any:
    """``--scan``: the scanners' observer, registered for the run (a context manager; none without ``--scan``)."""
    import contextlib

    if not names:
        return contextlib.nullcontext()
    from agentcompass.scanning.engine import build_scanners, split
    from agentcompass.scanning.names import JUDGE
    from agentcompass.scanning.observer import SCAN_PLUGIN, ScanObserver

    names = tuple(n for n in names if split(n)[0] != JUDGE)  # the judge asks a model: it scans after the run
    if not names:
        return contextlib.nullcontext()
    with cli_errors():
        scanners = build_scanners(host, names)
    return observing(host, ScanObserver(scanners), SCAN_PLUGIN)


def judged_scans(names: tuple[str, ...]) -> tuple[str, ...]:
    """The ``--scan judge:RUBRIC`` among ``names``: run when the run has finished, by its judge role."""
    from agentcompass.scanning.engine import split
    from agentcompass.scanning.names import JUDGE

    return tuple(n for n in names if split(n)[0] == JUDGE)


def _ignore_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def command_line_options(ctx: click.Context, arguments: dict[str, str | None],
                         options: dict[str, Any]) -> RunOptions:
    """The run options given on the command line — a flag given counts even when its value is the default —
    checked as a config file's are (errors spell the flags)."""
    given: dict[str, Any] = {k: v for k, v in arguments.items() if v is not None}
    for key, _, _ in RUN_OPTIONS:
        if ctx.get_parameter_source(key) in (None, click.core.ParameterSource.DEFAULT):
            continue
        value = options[key]
        if _pairs_option(key):
            if not value:
                continue
            value = parse_pairs(value, option_flag(key))
        elif isinstance(value, tuple):
            if not value:
                continue
            value = list(value)
        given[key] = value
    return RunOptions.parse(given, "", spell=option_flag)


def read_config(config_path: Path | None, rerun: Path | None, resume: Path | None) -> RunConfig | None:
    """``--config FILE`` or ``--rerun RUN_DIR`` (its run.json), read and checked; None without either."""
    if config_path is not None and rerun is not None:
        raise CLIError("give --config FILE or --rerun RUN_DIR, not both")
    if rerun is not None:
        if resume is not None:
            raise CLIError("--rerun starts a new run and --resume finishes an old one; give one of them")
        if not rerun.is_dir():
            raise CLIError(f"--rerun takes a run directory; {rerun} is not one")
    path = rerun if rerun is not None else config_path
    return load_run_config(path) if path is not None else None


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
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Run options from a TOML file (every option by its long name, '_' for '-'; [models.ROLE] "
                   "tables) or from a run's run.json; options given on the command line win.")
@click.option("--rerun", type=click.Path(path_type=Path), default=None, metavar="RUN_DIR",
              help="Run again exactly what RUN_DIR ran (its recorded options and seed) into a new directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("--task-lines", is_flag=True,
              help="Print one line per finished task (the default when stderr is not a terminal; on a terminal "
                   "a live status line is shown instead).")
@click.option("--otel", is_flag=True,
              help="Export OpenTelemetry traces of the run over OTLP (the agentcompass-otel plugin; endpoint and "
                   "protocol from $OTEL_EXPORTER_OTLP_*). Same as AGENTCOMPASS_OTEL=1.")
@click.option("--scan", "scan", multiple=True, metavar="NAME",
              help="Scan each attempt's transcript as it finishes with this scanner (repeatable; see "
                   "'agentcompass scan'); findings go to scans.jsonl and summary.json, never into a score.")
@run_options
@click.pass_context
def run_command(ctx: click.Context, benchmark: str | None, harness: str | None, model: str | None,
                user_model: str | None, judge_model: str | None, output: Path | None, resume: Path | None,
                config_path: Path | None, rerun: Path | None, as_json: bool, task_lines: bool, otel: bool,
                scan: tuple[str, ...], **options: Any) -> None:
    """Run BENCHMARK with HARNESS ('none' when the benchmark drives its own loop) and MODEL.

    Exit status: 0 when every task completed (whatever its score), 1 when any task ended in an error
    status, 2 for a usage error, 3 when the run cannot be set up here (no engine, unwritable output),
    130 when interrupted.
    """
    import asyncio

    from agentcompass.cli.progress import ConsoleReporter
    from agentcompass.runner import Runner

    if resume is not None and output is not None and output != resume:
        raise CLIError("--output and --resume name different directories; give only --resume")
    with cli_errors():
        config = read_config(config_path, rerun, resume)
        given = command_line_options(ctx, {"benchmark": benchmark, "harness": harness, "model": model,
                                           "user_model": user_model, "judge_model": judge_model}, options)
        merged = config.options | given if config is not None else given
        request = merged.request()
    if resume is None and not (request.benchmark and request.harness and request.model):
        missing = [k for k in ("benchmark", "harness", "model") if not getattr(request, k)]
        where = f" ({config.path} sets no {', '.join(missing)})" if config is not None else ""
        raise CLIError(f"run needs BENCHMARK HARNESS MODEL (or --config FILE, or --resume RUN_DIR){where}; "
                       "e.g. agentcompass run example_interactive none mock")
    host = plugin_host(ctx)
    if config is not None and config.plugins is not None:
        installed = {name: r.version for name, r in host.records.items() if r.loaded}
        changes = plugin_version_changes(config.plugins, installed)
        if changes:
            click.echo(f"warning: the plugins differ from those {config.path} was run with: {'; '.join(changes)} "
                       "— results may differ", err=True)
    if otel:
        enable_otel(host)
    # What the user chose (a recorded run's options are not: they only repeat what it ran).
    chosen = given.given_fields() | (config.options.given_fields() if config and config.plugins is None
                                     else frozenset())
    # A harness that takes the terminal (``human``) gets task lines, not a live status line drawn over its session.
    interactive = getattr(host.registry["harness"].get(request.harness), "factory", None)
    console = ConsoleReporter(enabled=True, task_lines=task_lines or getattr(interactive, "interactive", False))
    judged = judged_scans(scan)
    if judged:
        from agentcompass.scanning.judge import rubric_problem

        for spec in judged:
            problem = rubric_problem(spec)
            if problem:
                raise CLIError(problem)
        if not request.models.roles.get("judge"):
            raise CLIError(f"--scan {judged[0]} asks the run's judge role: give --judge-model MODEL")
    scanning = scan_observer(host, scan)
    runner = Runner(host, request, run_dir=resume or output, resume=resume is not None, given=chosen, control=True)
    with cli_errors(), observing(host, console), scanning:
        try:
            outcome = asyncio.run(runner.run())
        except KeyboardInterrupt:  # a Ctrl-C outside the run's own handling: before it started, or as it closed
            _ignore_signals()
            console.stop()
            click.echo("Interrupted; finished results are kept (resume with agentcompass run --resume RUN_DIR)."
                       if console.signals else "Interrupted before the run started; nothing was recorded.", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
    if console.signals or outcome.interrupted:
        _ignore_signals()  # the run is over and recorded: a late Ctrl-C must not turn exit 130 into a kill
    console.stop()
    summary = outcome.summary
    if judged and not outcome.interrupted:
        from agentcompass.cli.scan import judge_lines, scan_with

        with cli_errors():
            _, judging = scan_with(host, Path(outcome.run_dir), judged, request)
        for line in judge_lines(judging):
            click.echo(line, err=as_json)
    if scan:  # the findings written as the run went, as summary.json counts them
        import dataclasses

        from agentcompass.scanning.store import counts

        summary = dataclasses.replace(summary, findings=counts(Path(outcome.run_dir)))
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
