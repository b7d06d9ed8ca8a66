"""A secret a model echoes is masked when the run writes it (issue 21, item 5): credential-named variables and
``--secret-env`` are masked in results.jsonl, trajectories.jsonl and logs.jsonl themselves, not only by the
report."""

from __future__ import annotations

from pathlib import Path

from agentcompass.testing.scripted_models import LoopbackOpenAI, text

from tests.helpers.cli_processes import run_cli_subprocess

TOKEN = "tok-5f1e9a7c3b2d4e6f8a0b"
PLAIN = "plainvalue-83c1d2e4f5a6"


def _files(run_dir: Path) -> str:
    return "".join(p.read_text() for p in run_dir.glob("*.jsonl")) + (run_dir / "summary.json").read_text()


def test_an_echoed_credential_variable_and_a_secret_env_are_masked_in_the_files(tmp_path):
    def echo(request):
        return text(f"the token is {TOKEN} and the other value is {PLAIN}")

    with LoopbackOpenAI(echo, api_key=None) as server:
        out = tmp_path / "run"
        done = run_cli_subprocess(
            "run", "example_coding", "react", "openai-compatible/echo", "--model-base-url", server.base_url,
            "-n", "1", "--secret-env", "MY_PLAIN_VALUE", "-o", str(out), "--harness-arg", "max_turns=2",
            env={"MY_SERVICE_TOKEN": TOKEN, "MY_PLAIN_VALUE": PLAIN}, testing=False)
        assert (out / "trajectories.jsonl").exists(), done.stderr
    written = _files(out)
    assert "the token is ***" in written  # the echo was recorded, masked
    assert TOKEN not in written and TOKEN[:12] not in written
    assert PLAIN not in written and TOKEN not in done.stdout + done.stderr


def test_a_secret_env_that_is_not_set_is_refused_before_anything_is_written(tmp_path):
    done = run_cli_subprocess("run", "example_interactive", "none", "mock", "-n", "1", "--secret-env",
                              "NOT_SET_ANYWHERE_21", "-o", str(tmp_path / "r"), testing=False)
    assert done.returncode == 2 and "--secret-env names $NOT_SET_ANYWHERE_21, which is not set" in done.stderr
    assert not (tmp_path / "r").exists()
