"""``agentcompass validate`` through the real CLI: Harbor tasks broken on purpose are each named for their reason
(on ``local``, their Dockerfiles are FROM-only), the bundled benchmarks' oracles pass, a benchmark without
reference solutions is told so, and the validate directory is two normal run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentcompass.exit_codes import ExitCode

from tests.harbor.taskdirs import write_task
from tests.helpers.cli_processes import ROOT, run_cli_subprocess
from tests.helpers.docker_engine import require_engine

SAMPLES = ROOT / "docs" / "examples" / "harbor-tasks"


def broken_tasks(root: Path, counter: Path) -> Path:
    """A sound task and one broken for each reason ``validate`` names."""
    write_task(root, "sound", instruction="Write hello to /app/hello.txt.",
               test='[ "$(cat /app/hello.txt 2>/dev/null)" = hello ] && echo 1 > /logs/verifier/reward.txt '
                    "|| echo 0 > /logs/verifier/reward.txt\n",
               solve="echo hello > /app/hello.txt\n")
    write_task(root, "verifier-always-fails", instruction="Write hello to /app/hello.txt.",
               test="echo 0 > /logs/verifier/reward.txt\n", solve="echo hello > /app/hello.txt\n")
    write_task(root, "passes-untouched", instruction="Write hello to /app/hello.txt.",
               test="echo 1 > /logs/verifier/reward.txt\n", solve="echo hello > /app/hello.txt\n")
    # The coin: every other verification of a solved task passes (a counter on the host, under a lock, so the test
    # itself is not flaky whatever order the trials run in); an untouched one always fails (nop never passes).
    write_task(root, "coin-flip", instruction="Write hello to /app/hello.txt.",
               test="[ -f /app/hello.txt ] || { echo 0 > /logs/verifier/reward.txt; exit 0; }\n"
                    f"exec 9>{counter}.lock; flock 9\n"
                    f"n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}\n"
                    "echo $(( n % 2 )) > /logs/verifier/reward.txt\n",
               solve="echo hello > /app/hello.txt\n")
    return root


def validate(*args: str, timeout: float = 300) -> tuple[int, str, str]:
    done = run_cli_subprocess("validate", *args, timeout=timeout, testing=False)
    return done.returncode, done.stdout, done.stderr


def test_each_broken_task_is_named_for_its_reason(tmp_path: Path) -> None:
    tasks = broken_tasks(tmp_path / "tasks", tmp_path / "coin-counter")
    out = tmp_path / "validate"
    code, stdout, stderr = validate("harbor", "-b", f"path={tasks}", "--env", "local", "--trials", "3",
                                    "-o", str(out), "--json")
    assert code == ExitCode.TASK_ERRORS, stderr
    report = json.loads(stdout)
    problems = {t["task_id"]: t["problems"] for t in report["tasks"]}
    assert problems["sound"] == []
    assert problems["verifier-always-fails"] == ["oracle fails"]
    assert problems["passes-untouched"] == ["nop passes"]
    assert "flaky" in problems["coin-flip"]  # oracle verdicts: two passes, a fail
    coin = next(t for t in report["tasks"] if t["task_id"] == "coin-flip")
    # two passes and a fail, in whichever order the trials reached the counter
    assert sorted(coin["oracle"]) == [False, True, True] and coin["flip_rate"] == pytest.approx(1 / 3)
    assert not any(coin["nop"])
    assert report["metric"] == "reward" and report["trials"] == 3
    # each phase's time, per run and per task
    assert report["seconds"]["oracle"] > 0 and report["seconds"]["nop"] > 0
    assert coin["seconds"]["oracle"]["evaluate"] > 0
    # two normal run directories: results show reads them, and the table says the same
    for phase in ("oracle", "nop"):
        assert (out / phase / "summary.json").is_file()
    shown = run_cli_subprocess("results", "show", str(out / "oracle"), testing=False)
    assert shown.returncode == 0 and "verdict flips" in shown.stdout
    code, table, _ = validate("--resume", str(out))  # finished runs are kept, not run again
    assert code == ExitCode.TASK_ERRORS
    assert "verifier-always-fails" in table and "oracle fails" in table and "nop passes" in table
    assert "1 of 4 tasks" not in table and "3 of 4 tasks with a problem" in table
    assert (out / "oracle" / "results.jsonl").read_text().count("\n") == 12


def test_a_sound_set_of_tasks_exits_0(tmp_path: Path) -> None:
    code, stdout, stderr = validate("harbor", "-b", f"path={SAMPLES}", "-t", "hello-file", "--trials", "2",
                                    "-o", str(tmp_path / "v"))
    assert code == ExitCode.OK, stderr
    assert "0 of 1 tasks with a problem" in stdout and "hello-file" in stdout


def test_a_benchmark_without_reference_solutions_is_told_so_in_one_line(tmp_path: Path) -> None:
    done = run_cli_subprocess("validate", "seed_interactive", "-o", str(tmp_path / "v"))
    assert done.returncode == ExitCode.USAGE
    assert "has no reference solutions" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "v").exists()


@pytest.mark.parametrize("benchmark", ["example_coding", "example_interactive"])
def test_the_bundled_examples_oracles_pass(tmp_path: Path, benchmark: str) -> None:
    code, stdout, stderr = validate(benchmark, "--trials", "1", "-o", str(tmp_path / "v"), "--json")
    assert code == ExitCode.OK, stderr + stdout
    report = json.loads(stdout)
    assert report["tasks"] and all(all(t["oracle"]) and not any(t["nop"]) for t in report["tasks"])


@pytest.mark.docker
def test_the_harbor_sample_tasks_are_sound_on_docker(tmp_path: Path) -> None:
    require_engine()
    code, stdout, stderr = validate("harbor", "-b", f"path={SAMPLES}", "--env", "docker", "--trials", "1",
                                    "-o", str(tmp_path / "v"), "--json", timeout=600)
    assert code == ExitCode.OK, stderr
    assert {t["task_id"]: t["problems"] for t in json.loads(stdout)["tasks"]} == {"count-words": [],
                                                                                 "hello-file": []}
