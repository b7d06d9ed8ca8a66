"""``agentcompass run`` end to end (a real subprocess) on each cloud provider against its loopback cloud: the
example benchmark's agent reaches the model through the run's gateway, the cloud's credentials are used on the
host, every call is metered and priced, and no credential — key, secret, session token, access token, the
service account's private key — is anywhere in the run directory or the command's output."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.models.cloud_servers import (
    AWS_KEY_ID,
    AWS_SECRET,
    AWS_SESSION,
    AZURE_KEY,
    REGION,
    AzureServer,
    BedrockServer,
    VertexServer,
)
from tests.models.models_support import EXPECTED_SCORES, all_text, cli, read_jsonl


def bedrock_cloud(tmp_path: Path) -> tuple[Any, str, dict[str, str], list[str]]:
    server = BedrockServer(token=AWS_SESSION).start_in_thread()
    env = {"AWS_ACCESS_KEY_ID": AWS_KEY_ID, "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "AWS_SESSION_TOKEN": AWS_SESSION,
           "AWS_REGION": REGION}
    return server, "bedrock/anthropic.claude-sonnet-4-20250514-v1:0", env, [AWS_KEY_ID, AWS_SECRET, AWS_SESSION]


def vertex_cloud(tmp_path: Path) -> tuple[Any, str, dict[str, str], list[str]]:
    server = VertexServer().start_in_thread()
    key_file = server.key_file(tmp_path / "sa.json")
    private_key = json.loads(key_file.read_text())["private_key"]
    body = "".join(private_key.splitlines()[1:-1])
    return server, "vertex/claude-sonnet-4@20250514", {"GOOGLE_APPLICATION_CREDENTIALS": str(key_file)}, [body]


def azure_cloud(tmp_path: Path) -> tuple[Any, str, dict[str, str], list[str]]:
    server = AzureServer().start_in_thread()
    return server, "azure/gpt4o-prod", {"AZURE_OPENAI_API_KEY": AZURE_KEY}, [AZURE_KEY]


@pytest.mark.parametrize("cloud", [bedrock_cloud, vertex_cloud, azure_cloud], ids=["bedrock", "vertex", "azure"])
def test_a_run_on_the_cloud_keeps_its_credentials_on_the_host(
        cloud: Callable[[Path], tuple[Any, str, dict[str, str], list[str]]], tmp_path: Path) -> None:
    server, model, env, secrets = cloud(tmp_path)
    out = tmp_path / "run"
    try:
        proc = cli(["run", "example_interactive", "none", model, "--env", "local", "-o", str(out), "--json",
                    "--model-base-url", server.root, "--max-retries", "1"], env=env)
    finally:
        server.stop_thread()
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["status_counts"] == {"COMPLETED": 11}
    scores = {r["task_id"]: r["metrics"]["score"] for r in read_jsonl(out / "results.jsonl")}
    if model.startswith("azure/"):  # chat completions end to end: the mock policy's own scores
        assert scores == EXPECTED_SCORES
    else:  # the loopback's mock reads Anthropic's content blocks, not always as the policy expects
        assert set(scores) == set(EXPECTED_SCORES) and sum(scores.values()) > 0
    calls = read_jsonl(out / "trajectories.jsonl")
    assert calls and all(c["via"] == "gateway" and c["prompt_tokens"] > 0 for c in calls)
    assert len(server.requests) == len(calls)
    if not model.startswith("azure/"):  # the built-in table prices Claude on Bedrock and on Vertex
        assert summary["usage"]["agent"]["cost_usd"] > 0
    if isinstance(server, BedrockServer):
        assert server.verified == len(calls)
    if isinstance(server, VertexServer):
        secrets += server.issued
        assert server.issued
    text = all_text(out) + proc.stdout + proc.stderr
    for secret in secrets:
        assert secret not in text
        assert not [secret[i:i + 12] for i in range(len(secret) - 11) if secret[i:i + 12] in text]
