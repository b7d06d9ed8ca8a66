"""Claude Code under ``--env docker`` on the ``bedrock`` provider: its Messages requests pass through the run's
gateway unchanged onto InvokeModelWithResponseStream, signed with SigV4 on the host (the loopback Bedrock
recomputes every signature with botocore), and no AWS credential is in the container or the run directory."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from agentcompass.runtime import TaskStatus
from agentcompass.testing import run_benchmark
from agentcompass.testing.scripted_models import ScriptedModel

from tests.agents.scripts import Job, tool_agent
from tests.agents.test_agents_docker import bundle, harbor_tasks
from tests.helpers.docker_engine import require_engine
from tests.models.cloud_servers import AWS_KEY_ID, REGION, BedrockServer

pytestmark = [pytest.mark.docker, pytest.mark.agent_cli, pytest.mark.timeout(1800)]

SECRET = "aws-secret-" + secrets.token_hex(12)
SESSION = "aws-session-" + secrets.token_hex(16)
AWS_ENV = {"AWS_ACCESS_KEY_ID": AWS_KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_SESSION_TOKEN": SESSION,
           "AWS_REGION": REGION}


async def test_claude_code_on_bedrock_is_passed_through_and_signed_on_the_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_engine()
    bundle("claude-code")
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    # Patterns that match the credentials but not themselves (the agent records the commands it runs).
    check = ("cat /app/hello.txt; env | grep -c -e aws-secre[t] -e aws-sessio[n] -e AKIATESTKE[Y] "
             "| sed s/^/creds-in-env=/; grep -rlI -e aws-secre[t] -e aws-sessio[n] /tmp /opt /app /root "
             "2>/dev/null | wc -l | sed s/^/creds-in-files=/")
    job = Job("/app/hello.txt", "hello", check)
    async with BedrockServer(ScriptedModel(tool_agent(job)), secret=SECRET, token=SESSION) as server:
        run = await run_benchmark("harbor", "claude-code", "bedrock/anthropic.claude-sonnet-4-20250514-v1:0",
                                  environment="docker", run_dir=tmp_path / "run", task_ids=["hello"],
                                  benchmark_args={"path": str(harbor_tasks(tmp_path / "tasks"))},
                                  model_base_url=server.root, max_retries=0)
    result = run.result("hello")
    assert result.status is TaskStatus.COMPLETED, result.error
    assert result.metrics["reward"] == 1.0
    assert job.outputs and "hello" in job.outputs[1], job.outputs
    assert "creds-in-env=0" in job.outputs[1] and "creds-in-files=0" in job.outputs[1], job.outputs
    messages = [c for c in run.trajectories if c.get("protocol") == "anthropic"]
    assert messages and all(c["via"] == "gateway" and c["passthrough"] for c in messages)
    invoked = [r for r in server.requests if r.raw_path.endswith(("/invoke", "/invoke-with-response-stream"))]
    assert invoked and server.verified == len(server.requests)  # every request signed, each signature valid
    assert all("model" not in r.body and r.body["anthropic_version"] == "bedrock-2023-05-31" for r in invoked)
    assert all(r.headers["X-Amz-Security-Token"] == SESSION for r in server.requests)
    for path in run.run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data and SESSION.encode() not in data, path
