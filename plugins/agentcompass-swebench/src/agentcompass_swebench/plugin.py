"""Entry point of the swebench plugin: registers the ``swebench`` benchmark, and writes each swebench run's
``predictions.jsonl`` when the run ends. Importing it is cheap: the ``swebench`` package (and its heavy
dependencies) loads only when a run constructs the benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentcompass import hookimpl
from agentcompass.runtime.logs import get_logger

log = get_logger(plugin="swebench")

#: Runs of the ``swebench`` benchmark in this process: run id → (run directory, model_name_or_path).
_runs: dict[str, tuple[Path, str]] = {}


def _swebench(**options: Any) -> Any:
    from agentcompass_swebench.benchmark import make_swebench

    return make_swebench(**options)


@hookimpl
def register_benchmarks(register: Any) -> None:
    register("swebench", _swebench)


@hookimpl
def agentcompass_run_started(run_id: str, request: Any, run_dir: str) -> None:
    args = dict(request.benchmark_args)
    if request.benchmark != "swebench" or args.get("predictions"):
        return
    _runs[run_id] = (Path(run_dir), str(args.get("model_name") or f"{request.harness}/{request.model}"))


@hookimpl
def agentcompass_run_finished(run_id: str, summary: Any) -> None:
    entry = _runs.pop(run_id, None)
    if entry is None:
        return
    from agentcompass_swebench.predictions import write_run_predictions

    try:
        written = write_run_predictions(*entry)
    except OSError as exc:
        log.warning("swebench.predictions_not_written", run_dir=str(entry[0]), error=str(exc))
        return
    log.info("swebench.predictions_written", files=[str(p) for p in written])
