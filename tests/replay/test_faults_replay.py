"""``run --faults``: a run of example_coding against a scripted loopback model with a fault profile, through the
real CLI — the faults are recorded on their calls, the same seed gives the same faults, and the faulted run
replayed offline (``--replay`` with the same ``--faults``) equals itself; a bad profile is one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harnesses.support import solver
from tests.helpers.cli_processes import read_jsonl
from tests.helpers.replay_runs import agentcompass, calls, dead_base_url, record, results

pytestmark = pytest.mark.timeout(900)

MODEL = "openai-compatible/loopback"
#: The run finished (1: some task did not complete — here, those a fault broke).
DONE = (0, 1)
TASKS = ("roman", "flatten", "word_count")
PROFILE = """\
[default]
rate_limit = 0.15
retry_after = 0
bad_tool_json = 0.15
empty_answer = 0.1
latency = 0.01
latency_rate = 0.5
"""


def run_args(out: Path, profile: Path, *extra: str) -> list[str]:
    args = ["run", "example_coding", "react", MODEL, "-o", str(out), "--json", "--seed", "7",
            "--faults", str(profile), *extra]
    for task in TASKS:
        args += ["-t", task]
    return args


def faults(run_dir: Path) -> list[tuple[str, str, int, dict | None]]:
    return [(c["task_id"], c["role"], c["index"], c.get("fault")) for c in read_jsonl(run_dir / "trajectories.jsonl")]


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("faults") / "mixed.toml"
    path.write_text(PROFILE)
    return path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, profile: Path) -> Path:
    out = tmp_path_factory.mktemp("faulted") / "live"
    proc, _ = record(solver, *run_args(out, profile))
    assert proc.returncode in DONE, proc.stderr[-3000:]
    # react does not retry a failed model call: a task whose call got a 429 ends RUN_ERROR, naming the fault
    statuses = {k[0]: r["status"] for k, r in results(out).items()}
    assert set(statuses) == set(TASKS)
    for line in read_jsonl(out / "results.jsonl"):
        if line["status"] == "RUN_ERROR":
            assert "injected fault" in line["error"]
    return out


def test_faults_are_recorded_on_their_calls_and_never_billed(recorded: Path) -> None:
    injected = [f for *_, f in faults(recorded) if f and f["kind"] != "latency"]
    assert injected, "the profile's rates should fault some of the run's calls"
    lines = read_jsonl(recorded / "trajectories.jsonl")
    for line in lines:
        fault = line.get("fault")
        if fault and fault["kind"] in ("rate_limit", "empty_answer"):
            assert line["prompt_tokens"] == line["completion_tokens"] == 0
        if fault and fault["kind"] == "rate_limit":
            assert "injected fault: rate limited (HTTP 429)" in line["error"]
    info = json.loads((recorded / "run.json").read_text())
    assert info["model_calls"]["faults"]["profile"] == "mixed"


def test_the_same_seed_gives_the_same_faults(recorded: Path, profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    proc, _ = record(solver, *run_args(out, profile))
    assert proc.returncode in DONE, proc.stderr[-3000:]
    assert faults(out) == faults(recorded)
    assert results(out) == results(recorded)


def test_a_faulted_run_replayed_offline_equals_itself(recorded: Path, profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "replayed"
    proc = agentcompass(*run_args(out, profile, "--replay", str(recorded), "--model-base-url", dead_base_url()))
    assert proc.returncode in DONE, proc.stderr[-3000:]
    assert results(out) == results(recorded)
    assert calls(out) == calls(recorded)
    assert faults(out) == faults(recorded)


@pytest.mark.parametrize(("content", "said"), [
    ("[default]\nrate_limt = 0.1\n", "unknown key default.rate_limt"),
    ("[agent]\nrate_limit = 2\n", "agent.rate_limit = 2: a rate is a share of the calls, from 0 to 1"),
    ("[default]\nlatency_tail = 'long'\n", "default.latency_tail = 'long': use one of fixed, pareto"),
])
def test_a_bad_profile_is_one_line_naming_the_key(tmp_path: Path, content: str, said: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(content)
    proc = agentcompass("run", "example_coding", "react", "mock", "-o", str(tmp_path / "out"), "--faults", str(path))
    assert proc.returncode != 0
    assert said in proc.stderr and "--faults" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
