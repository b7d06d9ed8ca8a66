"""``agentcompass export atif`` on real runs: one trajectory per (task, trial), whose agent steps and tool calls
match ``trajectories.jsonl``, validated by Harbor's own models and validator (``harbor`` runs on Python 3.12, in
a virtual environment outside the repository)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime.names import safe_name

from tests.export.runs import PLANTED_KEY, final_calls, jsonl, run_cli

HARBOR = "harbor==0.25.0"
PYTHON312 = ("/root/.pyenv/versions/3.12.1/bin/python", shutil.which("python3.12") or "")


@pytest.fixture(scope="module")
def exported(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("atif")
    out = {}
    for name, run_dir in runs.items():
        done = run_cli("export", "atif", str(run_dir), "-o", str(base / name))
        assert done.returncode == 0, done.stderr
        assert f"wrote {sum(1 for _ in jsonl(run_dir / 'results.jsonl'))} trajectories" in done.stdout
        out[name] = base / name
    return out


def trajectory_path(out: Path, task_id: str, trial: int) -> Path:
    return out / f"{safe_name(task_id)}__trial-{trial}" / "agent" / "trajectory.json"


def made_tool_calls(call: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(tc["id"], tc["function"]["name"], json.loads(tc["function"]["arguments"]))
            for tc in (call["response"] or {}).get("tool_calls") or ()]


@pytest.mark.parametrize("name", ["main", "errored", "trials", "react"])
def test_one_agent_step_per_model_call(runs: dict[str, Path], exported: dict[str, Path], name: str) -> None:
    run_dir, out = runs[name], exported[name]
    calls = final_calls(run_dir)
    results = {(r["task_id"], r["trial"]): r for r in jsonl(run_dir / "results.jsonl")}
    assert len(list(out.glob("*/agent/trajectory.json"))) == len(results)
    for key, result in results.items():
        data = json.loads(trajectory_path(out, *key).read_text())
        steps = data["steps"]
        assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
        own = [c for c in calls[key] if c["role"] == "agent"]
        agent = [s for s in steps if s["source"] == "agent" and s.get("llm_call_count") == 1]
        assert len(agent) == len(own)
        for step, call in zip(agent, own, strict=True):
            assert [(t["tool_call_id"], t["function_name"], t["arguments"]) for t in step.get("tool_calls", [])] \
                == made_tool_calls(call)
            assert step["metrics"]["prompt_tokens"] == call["prompt_tokens"]
            assert step["metrics"]["completion_tokens"] == call["completion_tokens"]
            assert step["message"] == ((call["response"] or {}).get("content") or "")
            assert step.get("extra", {}).get("error") == call["error"]
            ids = {t["tool_call_id"] for t in step.get("tool_calls", [])}
            for observed in step.get("observation", {}).get("results", []):
                assert observed["source_call_id"] in ids
        extra = data["extra"]["agentcompass"]
        assert (extra["status"], extra["error"], extra["metrics"]) == (result["status"], result["error"],
                                                                       result["metrics"])
        assert data["final_metrics"]["total_prompt_tokens"] == sum(c["prompt_tokens"] for c in own)
        if not calls[key]:  # an attempt that made no call still has its trajectory, saying why
            assert len(steps) == 1 and steps[0]["source"] == "system" and result["status"] in steps[0]["message"]


def test_tool_results_are_the_steps_observations(exported: dict[str, Path]) -> None:
    data = json.loads(trajectory_path(exported["react"], "fizzbuzz", 1).read_text())
    sources = [s["source"] for s in data["steps"]]
    assert sources == ["system", "user", "agent", "agent", "agent"]
    write, bash, submit = data["steps"][2:]
    assert [t["function_name"] for t in write["tool_calls"]] == ["write_file"]
    assert write["observation"]["results"][0]["source_call_id"] == write["tool_calls"][0]["tool_call_id"]
    assert "imported" in bash["observation"]["results"][0]["content"]
    assert submit["tool_calls"][0]["arguments"] == {"answer": "solved fizzbuzz"}
    assert "observation" not in submit  # nothing came back after the last call
    failed = json.loads(trajectory_path(exported["react"], "roman", 1).read_text())
    last = failed["steps"][-1]
    assert last["source"] == "agent" and "HTTP 400" in last["extra"]["error"]
    assert failed["extra"]["agentcompass"]["status"] == "RUN_ERROR"


def test_no_secret_reaches_a_trajectory(exported: dict[str, Path]) -> None:
    for path in exported["react"].rglob("*.json"):
        assert PLANTED_KEY not in path.read_text(), path


# -- Harbor's own models and validator ------------------------------------------------------------------------

VALIDATE = r"""
import json, sys
from harbor.models.trajectories import Trajectory
from harbor.utils.trajectory_validator import TrajectoryValidator
out = {}
for path in sys.argv[1:]:
    validator = TrajectoryValidator()
    ok = validator.validate(path)
    entry = {"valid": ok, "errors": validator.get_errors()}
    if ok:
        t = Trajectory.model_validate(json.load(open(path)))
        entry["steps"] = len(t.steps)
        entry["agent_calls"] = [[c.tool_call_id for c in (s.tool_calls or [])] for s in t.steps
                                if s.source == "agent" and s.llm_call_count == 1]
        entry["schema_version"] = t.schema_version
    out[path] = entry
print(json.dumps(out))
"""


@pytest.fixture(scope="session")
def harbor_python() -> str:
    """A Python 3.12 with ``harbor`` installed, in a virtual environment outside the repository (kept in the
    user's cache between sessions)."""
    python = next((p for p in PYTHON312 if p and Path(p).exists()), None)
    if python is None:
        if os.environ.get("CI"):
            pytest.fail("no Python 3.12 to run harbor's validator (expected /root/.pyenv/versions/3.12.1)")
        pytest.skip("no Python 3.12 to run harbor's validator")
    venv = Path.home() / ".cache" / "agentcompass-tests" / f"{HARBOR.replace('==', '-')}-venv"
    bin_python = venv / "bin" / "python"
    check = [str(bin_python), "-c", "import harbor.utils.trajectory_validator"]
    if bin_python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return str(bin_python)
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    uv = shutil.which("uv")
    if uv:
        steps = [[uv, "venv", "--quiet", "--python", python, str(venv)],
                 [uv, "pip", "install", "--quiet", "--python", str(bin_python), HARBOR]]
    else:
        steps = [[python, "-m", "venv", str(venv)], [str(bin_python), "-m", "pip", "install", "-q", HARBOR]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{' '.join(step)} failed: {done.stderr[-2000:]}"
    return str(bin_python)


@pytest.mark.slow
def test_harbors_validator_accepts_every_trajectory(runs: dict[str, Path], exported: dict[str, Path],
                                                    harbor_python: str) -> None:
    paths = {str(p): (name, p) for name, out in exported.items() for p in sorted(out.glob("*/agent/trajectory.json"))}
    done = subprocess.run([harbor_python, "-c", VALIDATE, *paths], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    checked = json.loads(done.stdout)
    assert set(checked) == set(paths)
    invalid = {p: e["errors"] for p, e in checked.items() if not e["valid"]}
    assert not invalid
    for path, entry in checked.items():
        name, p = paths[path]
        data = json.loads(p.read_text())
        key = (data["extra"]["agentcompass"]["task_id"], data["extra"]["agentcompass"]["trial"])
        own = [c for c in final_calls(runs[name])[key] if c["role"] == "agent"]
        assert entry["schema_version"] == "ATIF-v1.7"
        assert entry["steps"] == len(data["steps"])
        assert entry["agent_calls"] == [[tc[0] for tc in made_tool_calls(c)] for c in own]
