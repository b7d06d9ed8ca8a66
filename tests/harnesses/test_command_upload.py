"""``--harness-arg upload=LOCAL:PATH``: the command harness puts your agent into the environment before it runs
it (issue 21, item 9) — through the real CLI, with the README's example agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass_harnesses.command import CommandHarness

from tests.helpers.cli_processes import ROOT, run_cli_subprocess

README_COMMAND = "python3 /opt/agent/run.py --task {instruction_file}"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _run(tmp_path: Path, *args: str) -> tuple[Path, object]:
    out = tmp_path / "run"
    done = run_cli_subprocess("run", "example_coding", "command", "mock", "-t", "roman", "-o", str(out), *args,
                              testing=False)
    return out, done


def test_an_uploaded_agent_runs_in_the_environment_and_reaches_the_gateway(tmp_path):
    out, done = _run(tmp_path, "--harness-arg", "upload=docs/examples/agent:agent", "--harness-arg",
                     "upload=README.md:notes/readme.md", "--harness-arg",
                     "command=test -f notes/readme.md && python3 agent/run.py --task {instruction_file}")
    (result,) = read_jsonl(out / "results.jsonl")
    assert result["status"] == "COMPLETED", (result["error"], done.stderr)
    assert "answered" in result["artifacts"]["command"]["stdout_tail"]
    assert [c["via"] for c in read_jsonl(out / "trajectories.jsonl")] == ["gateway"]


def test_an_upload_that_does_not_exist_is_a_usage_error_before_anything_runs(tmp_path):
    out, done = _run(tmp_path, "--harness-arg", "upload=no/such/agent:/opt/agent", "--harness-arg",
                     f"command={README_COMMAND}")
    assert done.returncode == 2 and "no/such/agent does not exist" in done.stderr
    assert not out.exists()
    with pytest.raises(UsageError, match="expected LOCAL:PATH"):
        CommandHarness(command="x", upload="just-a-path")


@pytest.mark.docker
def test_the_readme_example_works_as_written_in_docker(tmp_path):
    from tests.helpers.docker_engine import require_engine

    require_engine()
    out, done = _run(tmp_path, "--env", "docker", "--harness-arg", "upload=docs/examples/agent:/opt/agent",
                     "--harness-arg", f"command={README_COMMAND}")
    (result,) = read_jsonl(out / "results.jsonl")
    assert result["status"] == "COMPLETED", (result["error"], done.stderr)
    assert "answered" in result["artifacts"]["command"]["stdout_tail"]
    readme = (ROOT / "README.md").read_text()
    assert "--harness-arg upload=docs/examples/agent:/opt/agent" in readme and README_COMMAND in readme
