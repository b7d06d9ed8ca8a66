"""``agentcompass export inspect`` on real runs, read back with Inspect's own reader (``read_eval_log``) and
compared figure by figure with what the run directory holds."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.log import read_eval_log

from tests.export.runs import PLANTED_KEY, final_calls, jsonl, run_cli


def export(run_dir: Path, out: Path) -> Any:
    done = run_cli("export", "inspect", str(run_dir), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout
    return read_eval_log(str(out))


@pytest.fixture(scope="module")
def logs(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """Each run exported once through the CLI (inspect_ai takes seconds to import), and read back."""
    base = tmp_path_factory.mktemp("inspect-logs")
    return {name: (base / f"{name}.eval", export(run_dir, base / f"{name}.eval")) for name, run_dir in runs.items()}


def close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-12)


@pytest.mark.parametrize("name", ["main", "errored", "trials", "react"])
def test_every_figure_of_the_run_reads_back(runs: dict[str, Path], logs: dict[str, tuple[Path, Any]],
                                            name: str) -> None:
    run_dir = runs[name]
    log = logs[name][1]
    info = json.loads((run_dir / "run.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    req = info["request"]

    assert log.status == "success"
    assert log.eval.task == req["benchmark"] and log.eval.run_id == info["run_id"]
    assert log.eval.model == info["plan"]["model_roles"]["agent"]
    assert log.eval.solver == req["harness"] and log.eval.config.epochs == req["trials"]
    assert log.plan.steps[0].solver == req["harness"]
    assert log.eval.dataset.samples == summary["n_tasks"]

    # results: every scalar metric's figures, and pass@k / pass^k
    counts = summary["status_counts"]
    assert log.results.total_samples == sum(counts.values())
    assert log.results.completed_samples == counts.get("COMPLETED", 0)
    scores = {s.name: s for s in log.results.scores}
    assert set(scores) == set(summary["metrics"]["overall"])
    for metric, agg in summary["metrics"]["overall"].items():
        figures = {k: m.value for k, m in scores[metric].metrics.items()}
        for key in ("mean", "mean_completed", "stderr"):
            assert close(figures.get(key), agg[key]), (metric, key)
        if agg["ci95"] is not None:
            assert [figures["ci95_low"], figures["ci95_high"]] == agg["ci95"]
        assert scores[metric].scored_samples == agg["n_completed"]
        assert scores[metric].unscored_samples == agg["n_errored"]
        if metric == summary["primary_metric"]:
            for pk in summary["metrics"]["pass_k"]:
                assert close(figures[f"pass@{pk['k']}"], pk["pass_at_k"])
                assert close(figures[f"pass^{pk['k']}"], pk["pass_hat_k"])

    # usage per role and per model
    for role, usage in summary["usage"].items():
        got = log.stats.role_usage[role]
        assert (got.input_tokens, got.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
        model = info["plan"]["model_roles"][role]
        assert log.stats.model_usage[model].input_tokens == usage["prompt_tokens"]

    # samples: one per (task, trial), with the final attempt's calls, scores, errors and retries
    results = {(r["task_id"], r["trial"]): r for r in jsonl(run_dir / "results.jsonl")}
    retried: dict[tuple[str, int], int] = {}
    for r in jsonl(run_dir / "attempts.jsonl"):
        retried[(r["task_id"], r["trial"])] = retried.get((r["task_id"], r["trial"]), 0) + 1
    calls = final_calls(run_dir)
    samples = {(s.id, s.epoch): s for s in log.samples}
    assert set(samples) == set(results)
    for key, result in results.items():
        sample, own = samples[key], calls[key]
        assert sample.metadata["status"] == result["status"]
        assert sample.metadata["attempt"] == result["attempt"]
        if result["status"] == "COMPLETED":
            assert sample.error is None
            assert {k: s.value for k, s in sample.scores.items()} == result["metrics"]
        else:  # an errored sample shows as errored: its status, phase and message
            assert sample.scores is None
            assert result["status"] in sample.error.message and result["error"] in sample.error.message
            assert result["error_phase"] in sample.error.message
        assert len(sample.error_retries or []) == retried.get(key, 0)
        assert len(sample.events) == len(own)
        for event, call in zip(sample.events, own, strict=True):
            assert event.event == "model" and event.role == call["role"]
            assert event.output.usage.input_tokens == call["prompt_tokens"]
            assert event.output.usage.output_tokens == call["completion_tokens"]
            assert event.error == call["error"]
        tokens = sum(c["prompt_tokens"] for c in own), sum(c["completion_tokens"] for c in own)
        assert (sum(u.input_tokens for u in sample.model_usage.values()),
                sum(u.output_tokens for u in sample.model_usage.values())) == tokens
        # every tool call the model made is in the sample's messages, with its arguments
        made = [(tc["id"], tc["function"]["name"], json.loads(tc["function"]["arguments"]))
                for c in own if c["response"] for tc in c["response"].get("tool_calls") or ()]
        shown = [(tc.id, tc.function, tc.arguments) for m in sample.messages if m.role == "assistant"
                 for tc in m.tool_calls or ()]
        assert shown == made
        assert sample.total_time == result["timings"]["total"]


def test_tool_results_and_the_conversation(logs: dict[str, tuple[Path, Any]]) -> None:
    log = logs["react"][1]
    sample = next(s for s in log.samples if s.id == "fizzbuzz")
    roles = [m.role for m in sample.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    tool = [m for m in sample.messages if m.role == "tool"]
    assert tool[0].function == "write_file" and tool[1].function == "bash"
    assert "imported" in tool[1].text
    assert sample.output.choices[0].message.tool_calls[0].function == "submit"
    assert sample.output.choices[0].stop_reason == "tool_calls"


def test_no_secret_reaches_the_log(logs: dict[str, tuple[Path, Any]]) -> None:
    out = logs["react"][0]
    with zipfile.ZipFile(out) as archive:
        for member in archive.namelist():
            assert PLANTED_KEY.encode() not in archive.read(member), member


@pytest.mark.slow  # a long end-to-end run; CI runs it (--all-tests)
def test_json_format_and_default_location(runs: dict[str, Path], tmp_path: Path) -> None:
    log = export(runs["trials"], tmp_path / "trials.json")
    assert json.loads((tmp_path / "trials.json").read_text())["eval"]["task"] == "example_interactive"
    assert len(log.samples) == 33 and {s.epoch for s in log.samples} == {1, 2, 3}
    main = shutil.copytree(runs["main"], tmp_path / "main")  # the runs are shared: write into a copy
    done = run_cli("export", "inspect", str(main))
    run_id = json.loads((main / "run.json").read_text())["run_id"]
    assert done.returncode == 0 and (main / f"{run_id}.eval").is_file()


def test_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    done = run_cli("export", "inspect", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert done.stderr.strip() == f"Error: run directory {tmp_path / 'nowhere'} does not exist"
    (tmp_path / "not-a-run").mkdir()
    done = run_cli("export", "atif", str(tmp_path / "not-a-run"))
    assert done.returncode == 2 and "is not a run directory" in done.stderr and "Traceback" not in done.stderr
