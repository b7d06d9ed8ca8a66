"""Per-attempt limits of the installed agents and ``react`` (``BaseHarness.attempt_limits``): a default a user
sees and changes (``--harness-arg max_calls=`` / ``max_tokens=``), enforced by the run's meter on every agent
call — through the gateway too — and ending the attempt as ``LIMIT_REACHED``. Before, an agent its model could
not steer to an end (mini-swe-agent with ``mock``) ran until stopped: 678 calls and 10.5 M tokens in 45 s."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime import AttemptLimits
from agentcompass_agents.catalog import AGENTS
from agentcompass_agents.harness import DEFAULT_LIMITS
from agentcompass_agents.plugin import harness_class
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.cli_processes import run_cli_subprocess

#: An agent CLI that never stops on its own: it asks the gateway again after every answer, until a call fails.
LOOPING_AGENT = f"""#!{sys.executable}
import json, os, sys, urllib.error, urllib.request
base, key = os.environ["OPENAI_BASE_URL"].rstrip("/"), os.environ["OPENAI_API_KEY"]
messages = [{{"role": "user", "content": "Use the bash tool to run 'ls'."}}]
while True:
    request = urllib.request.Request(base + "/chat/completions", headers={{
        "Authorization": "Bearer " + key, "Content-Type": "application/json"}},
        data=json.dumps({{"model": "agent", "messages": messages}}).encode())
    try:
        answer = json.load(urllib.request.urlopen(request, timeout=60))
    except urllib.error.HTTPError as exc:
        print("gateway refused:", exc.read().decode(), file=sys.stderr)
        sys.exit(1)
    messages += [answer["choices"][0]["message"], {{"role": "user", "content": "Go on with 'ls'."}}]
"""


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_every_installed_agent_has_the_default_limits_and_takes_its_own(name: str) -> None:
    cls = harness_class(name)
    assert cls().attempt_limits() == DEFAULT_LIMITS == AttemptLimits(max_calls=200, max_tokens=4_000_000)
    assert cls(max_calls="7", max_tokens="1_000").attempt_limits() == AttemptLimits(7, 1000)
    assert cls(max_calls="0", max_tokens="none").attempt_limits() == AttemptLimits(None, None)


@given(st.text(max_size=8).filter(lambda t: t.strip().replace("_", "").lower() not in ("0", "none")
                                  and not t.strip().replace("_", "").isdigit()))
def test_a_bad_limit_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match="'max_calls' must be a whole number of at least 1, or 0"):
        harness_class("codex")(max_calls=value)


def test_the_readmes_name_the_default_limits() -> None:
    root = Path(__file__).resolve().parents[2]
    agents = (root / "plugins" / "agentcompass-agents" / "README.md").read_text()
    assert "`max_calls` (default 200)" in agents and "`max_tokens` (default 4,000,000)" in agents
    assert "| `max_tokens` | 1,000,000 |" in (root / "plugins" / "agentcompass-harnesses" / "README.md").read_text()


def results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def agent_calls(run_dir: Path) -> list[dict]:
    path = run_dir / "trajectories.jsonl"
    return [c for c in map(json.loads, path.read_text().splitlines()) if c["role"] == "agent"]


@pytest.mark.parametrize(("args", "calls"), [(["--harness-arg", "max_calls=7"], 7), ([], 200)])
def test_a_looping_agent_ends_as_limit_reached_at_its_call_limit(tmp_path: Path, args: list[str],
                                                                 calls: int) -> None:
    """A real subprocess agent calling the real gateway over loopback HTTP, under `--env local`."""
    agent = tmp_path / "looping-agent"
    agent.write_text(LOOPING_AGENT)
    agent.chmod(0o755)
    out = tmp_path / "run"
    started = time.monotonic()
    done = run_cli_subprocess("run", "example_coding", "mini-swe-agent", "mock", "-t", "roman",
                              "--harness-arg", f"bin={agent}", *args, "-o", str(out), testing=False, timeout=120)
    assert time.monotonic() - started < 60
    assert done.returncode == 1, done.stderr
    (result,) = results(out)
    assert result["status"] == "LIMIT_REACHED", result
    assert f"max_calls={calls} agent calls per attempt" in result["error"]
    assert "--harness-arg max_calls=N" in result["error"]
    made = agent_calls(out)
    assert len([c for c in made if c["error"] is None]) == calls
    assert "limit reached" in made[-1]["error"]  # the refused one, recorded


def test_a_token_limit_ends_the_attempt_too(tmp_path: Path) -> None:
    agent = tmp_path / "looping-agent"
    agent.write_text(LOOPING_AGENT)
    agent.chmod(0o755)
    out = tmp_path / "run"
    done = run_cli_subprocess("run", "example_coding", "mini-swe-agent", "mock", "-t", "roman",
                              "--harness-arg", f"bin={agent}", "--harness-arg", "max_tokens=500",
                              "-o", str(out), testing=False, timeout=120)
    assert done.returncode == 1, done.stderr
    (result,) = results(out)
    assert result["status"] == "LIMIT_REACHED" and "max_tokens=500 agent tokens per attempt" in result["error"]
    answered = [c for c in agent_calls(out) if c["error"] is None]
    used = sum(c["prompt_tokens"] + c["completion_tokens"] for c in answered)
    assert used >= 500 and used - (answered[-1]["prompt_tokens"] + answered[-1]["completion_tokens"]) < 500


def test_react_stops_at_its_token_limit(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = run_cli_subprocess("run", "example_coding", "react", "mock", "-t", "roman", "--harness-arg",
                              "max_tokens=50", "-o", str(out), testing=False, timeout=120)
    assert done.returncode == 1, done.stderr
    (result,) = results(out)
    assert result["status"] == "LIMIT_REACHED" and "max_tokens=50" in result["error"], result
