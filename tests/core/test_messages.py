"""Messages and exit codes a newcomer meets (issue 21, item 10), through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.cli_processes import run_cli_subprocess

MAIN = ["run", "example_interactive", "none", "mock"]


def test_a_gateway_host_that_cannot_be_used_says_so_and_leaves_nothing(tmp_path):
    for host, words in [("999.1.1.1", "not an address or host name"), ("192.0.2.77", "cannot listen there")]:
        out = tmp_path / host
        done = run_cli_subprocess(*MAIN, "-n", "1", "--gateway-host", host, "-o", str(out), testing=False)
        assert done.returncode == 2, done.stderr
        assert f"--gateway-host {host!r}" in done.stderr and words in done.stderr
        assert "unexpected" not in done.stderr and not out.exists()


def test_a_setup_failure_leaves_no_empty_run_directory(tmp_path):
    out = tmp_path / "run"
    done = run_cli_subprocess(*MAIN, "-n", "1", "--env", "docker", "-o", str(out), testing=False,
                              env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert done.returncode == 3, done.stderr
    assert "docs.docker.com/engine/install" in done.stderr and not out.exists()


def _finished_run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    assert run_cli_subprocess(*MAIN, "-n", "3", "-o", str(out), testing=False).returncode == 0
    return out


def test_resume_of_a_directory_it_cannot_write_is_a_setup_error(tmp_path):
    out = _finished_run(tmp_path)
    (out / ".agentcompass-write-check").mkdir()  # what a read-only directory does to the write check
    done = run_cli_subprocess("run", "--resume", str(out), testing=False)
    assert done.returncode == 3 and "cannot write to run directory" in done.stderr, done.stderr


def test_evaluate_says_when_its_source_is_unfinished_and_never_suggests_a_resume_it_lacks(tmp_path):
    out = _finished_run(tmp_path)
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(lines[:2]) + "\n")
    (out / "summary.json").unlink()
    again = tmp_path / "again"
    done = run_cli_subprocess("evaluate", str(out), "-o", str(again), testing=False)
    assert "is unfinished (1 of 3 planned results have no final record)" in done.stderr, done.stderr
    existing = run_cli_subprocess("evaluate", str(out), "-o", str(again), testing=False)
    assert existing.returncode == 2 and "choose another --output" in existing.stderr
    assert f"--resume {again}" not in existing.stderr.split("(")[0]


def test_option_examples_fit_the_option(tmp_path):
    done = run_cli_subprocess(*MAIN, "--phase-timeout", "run", testing=False)
    assert done.returncode == 2 and "--phase-timeout run=600" in done.stderr and "max_turns" not in done.stderr


def test_a_plugin_selection_naming_nothing_installed_is_reported(tmp_path):
    done = run_cli_subprocess(*MAIN, "-n", "1", "-o", str(tmp_path / "r"), testing=False,
                              env={"AGENTCOMPASS_LOAD_PLUGINS": "nosuch"})
    assert done.returncode == 2
    assert "warning: $AGENTCOMPASS_LOAD_PLUGINS limits loading to: builtin, nosuch" in done.stderr
    assert "no installed plugin is called nosuch" in done.stderr
    assert "unknown benchmark" in done.stderr and done.stderr.count("AGENTCOMPASS_LOAD_PLUGINS") >= 2


def test_an_unknown_task_id_of_an_unloaded_domain_gets_the_hint(tmp_path):
    done = run_cli_subprocess("run", "taubench", "oracle", "mock", "-t", "retail/5", "-o", str(tmp_path / "r"),
                              testing=False)
    assert done.returncode == 2 and "unknown task id(s) retail/5" in done.stderr
    assert "-b domain=retail" in done.stderr


def test_a_huge_concurrency_is_capped_at_what_the_run_can_use_and_says_so(tmp_path):
    out = tmp_path / "r"
    done = run_cli_subprocess(*MAIN, "-n", "3", "-c", "100000", "-o", str(out), testing=False)
    assert done.returncode == 0, done.stderr
    assert "--concurrency 100000 is more than this run can use (3 attempts to run): using 3" in done.stderr
    assert json.loads((out / "run.json").read_text())["request"]["concurrency"] == 100000  # what was asked
