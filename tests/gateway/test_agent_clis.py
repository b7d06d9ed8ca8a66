"""The real agent CLIs through the ``command`` harness under ``--env docker``: Claude Code (Anthropic Messages)
and Codex CLI (OpenAI Responses) solve a Harbor task against a scripted model behind the run's gateway — the
container has no network and holds no provider key; every call is metered."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentcompass.testing.scripted_models import LoopbackOpenAI

from tests.gateway.cli_responder import cli_responder
from tests.helpers.docker_engine import require_engine

pytestmark = [pytest.mark.docker, pytest.mark.agent_cli]

IMAGE_DIR = Path(__file__).parent / "agent_cli_image"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
KEY = "sk-provider-" + hashlib.sha256(b"h22-agent-cli").hexdigest()[:32]
#: What the agent command shows after the agent ran: its environment and the files agents keep state in.
SHOW_STATE = ("; echo '--- env'; env; echo '--- files'; find /root /app /tmp -type f -size -256k 2>/dev/null "
              "| grep -v '/node_modules/' | xargs cat 2>/dev/null; true")

CLAUDE = ('IS_SANDBOX=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p --dangerously-skip-permissions '
          '"$(cat {instruction_file})"')
CODEX = ('codex exec -m scripted --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox '
         '-c model_provider=gw -c model_providers.gw.name=gw -c "model_providers.gw.base_url=\\"$OPENAI_BASE_URL\\"" '
         '-c model_providers.gw.env_key=OPENAI_API_KEY -c model_providers.gw.wire_api=responses '
         '"$(cat {instruction_file})"')


@pytest.fixture(scope="session")
def agent_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The CLIs' image, built once (tagged by its Dockerfile's hash: a later session reuses it)."""
    require_engine()
    dockerfile = (IMAGE_DIR / "Dockerfile").read_text()
    tag = "agentcompass-test-agent-clis:" + hashlib.sha256(dockerfile.encode()).hexdigest()[:12]
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    context = tmp_path_factory.mktemp("agent-cli-image")
    (context / "Dockerfile").write_text(dockerfile)
    shutil.copy(HOST_CA, context / "ca-certificates.crt")
    build = subprocess.run(["docker", "build", "-t", tag, str(context)], capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return tag


@pytest.fixture
def task_dir(tmp_path: Path, agent_image: str) -> Path:
    task = tmp_path / "tasks" / "hello"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "instruction.md").write_text("Create a file hello.txt in /app containing the word hello.\n")
    (task / "task.toml").write_text('version = "1.0"\n\n[agent]\ntimeout_sec = 600\n\n[verifier]\ntimeout_sec = 60\n')
    (task / "environment" / "Dockerfile").write_text(f"FROM {agent_image}\nWORKDIR /app\n")
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\nif grep -q hello /app/hello.txt; then echo 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n")
    return task.parent


@pytest.fixture
def inspected() -> Iterator[dict[str, str]]:
    """``docker inspect`` of every agentcompass container that appears while the test runs (filled as they do)."""
    seen: dict[str, str] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.5):
            ids = subprocess.run(["docker", "ps", "-q", "--filter", "label=agentcompass.managed"],
                                 capture_output=True, text=True).stdout.split()
            for cid in set(ids) - set(seen):
                seen[cid] = subprocess.run(["docker", "inspect", cid], capture_output=True, text=True).stdout

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    yield seen
    stop.set()
    thread.join(10)


@pytest.mark.parametrize(("agent", "command", "protocol"), [("claude", CLAUDE, "anthropic"),
                                                           ("codex", CODEX, "responses")])
def test_an_agent_cli_solves_a_harbor_task_through_the_gateway(
        agent: str, command: str, protocol: str, task_dir: Path, tmp_path: Path, inspected: dict[str, str]) -> None:
    out = tmp_path / "run"
    with LoopbackOpenAI(cli_responder, api_key=KEY) as server:
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "agentcompass"), "run", "harbor", "command", "openai-compatible/scripted",
             "--model-base-url", server.base_url, "--model-api-key-env", "H22_PROVIDER_KEY",
             "-b", f"path={task_dir}", "--env", "docker", "-o", str(out), "--max-retries", "0",
             "--harness-arg", f"command={command}{SHOW_STATE}"],
            env={**os.environ, "H22_PROVIDER_KEY": KEY}, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (result,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert result["status"] == "COMPLETED" and result["metrics"]["reward"] == 1.0, result
    calls = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    # Every call the CLI made reached the model through the gateway, in the CLI's own protocol, and was metered.
    assert len(calls) == len(server.requests) >= 2
    assert {(c["protocol"], c["via"]) for c in calls} == {(protocol, "gateway")}
    assert all(c["prompt_tokens"] > 0 and c["error"] is None for c in calls)
    assert any(c["response"] and c["response"].get("tool_calls") for c in calls)
    # The provider's key: sent to the provider, and nowhere in the container, its files, or what docker knows.
    assert all(h == f"Bearer {KEY}" for h in server.auth_headers)
    shown = (out / "artifacts").rglob("*")
    state = "\n".join(p.read_text(errors="replace") for p in shown if p.is_file())
    assert "--- env" in state and "ANTHROPIC_BASE_URL=http://127.0.0.1:" in state and "acgw-" in state
    assert KEY not in state
    assert inspected and all(KEY not in text for text in list(inspected.values()))
    assert KEY not in "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
