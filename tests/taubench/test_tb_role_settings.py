"""Per-role model settings reach the right provider (issue 26): a run config file puts the agent on one loopback
server and the user simulator and judge on another, each with its own key variable and options; run through the
CLI on the local environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import tb_support as s
from agentcompass.testing import LoopbackOpenAI

AGENT_KEY = "agent-key-0123456789abcdef"
USER_KEY = "user-key-fedcba9876543210"
TASKS = ("mock/create_task_1", "retail/2")  # retail/2 needs the judge (an NL assertion)


def test_each_role_reaches_its_own_server_with_its_own_key_and_options(tmp_path: Path):
    agent_requests: list[dict] = []
    other_requests: list[dict] = []
    agent_side = s.role_responder(judge=s.approving_judge, requests=agent_requests, among=TASKS)
    other_side = s.role_responder(judge=s.approving_judge, requests=other_requests, among=TASKS)
    out = tmp_path / "run"
    with LoopbackOpenAI(agent_side, api_key=AGENT_KEY) as agent_server, \
            LoopbackOpenAI(other_side, api_key=USER_KEY) as other_server:
        config = tmp_path / "run.toml"
        config.write_text(f"""
benchmark = "taubench"
harness = "none"
task_ids = {json.dumps(list(TASKS))}
benchmark_args = {{ domain = ["mock", "retail"] }}

[models.agent]
model = "openai-compatible/agent-model"
base_url = "{agent_server.base_url}"
api_key_env = "H26A_AGENT_KEY"
args = {{ seed = 7 }}

[models.user]
model = "openai-compatible/user-model"
base_url = "{other_server.base_url}"
api_key_env = "H26A_USER_KEY"
args = {{ top_p = 0.25 }}
max_connections = 2

[models.judge]
model = "openai-compatible/judge-model"
base_url = "{other_server.base_url}"
api_key_env = "H26A_USER_KEY"
""")
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
               "H26A_AGENT_KEY": AGENT_KEY, "H26A_USER_KEY": USER_KEY}
        proc = subprocess.run([sys.executable, "-m", "agentcompass.cli.main", "run", "--config", str(config),
                               "--json", "-o", str(out)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        agent_auth, other_auth = list(agent_server.auth_headers), list(other_server.auth_headers)
        agent_url, other_url = agent_server.base_url, other_server.base_url

    assert agent_requests and {s.role_of(r) for r in agent_requests} == {"agent"}
    assert {s.role_of(r) for r in other_requests} == {"user", "judge"}
    assert set(agent_auth) == {f"Bearer {AGENT_KEY}"} and set(other_auth) == {f"Bearer {USER_KEY}"}
    # each role's options go to its own calls only
    assert all(r.get("seed") == 7 and "top_p" not in r for r in agent_requests)
    assert all(r.get("top_p") == 0.25 for r in other_requests if s.role_of(r) == "user")
    assert all("top_p" not in r and "seed" not in r for r in other_requests if s.role_of(r) == "judge")
    assert json.loads(proc.stdout)["status_counts"] == {"COMPLETED": len(TASKS)}
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["task_id"]: r["metrics"]["reward"] for r in results} == dict.fromkeys(TASKS, 1.0)

    request = json.loads((out / "run.json").read_text())["request"]
    assert (request["model_base_url"], request["model_api_key_env"]) == (agent_url, "H26A_AGENT_KEY")
    assert request["role_settings"]["user"] == {"base_url": other_url, "api_key_env": "H26A_USER_KEY",
                                                "args": {"top_p": "0.25"}, "max_connections": 2}
    assert request["role_models"] == {"user": "openai-compatible/user-model",
                                      "judge": "openai-compatible/judge-model"}
    for path in out.rglob("*"):  # the keys' names are recorded, never their values
        if path.is_file():
            text = path.read_bytes()
            assert AGENT_KEY.encode() not in text and USER_KEY.encode() not in text, path
