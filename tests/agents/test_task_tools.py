"""A Harbor task's ``mcp_servers`` and ``skills_dir`` reach the installed agents that take them (Claude Code,
Codex, Gemini CLI, OpenCode), each in its own configuration, as Harbor 0.25's installed agents write it (Claude
Code's checked against Harbor's own code); the skills are copied where each agent reads them (a real shell)."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime import RunRequest
from agentcompass_agents.harness import Context
from agentcompass_agents.plugin import harness_class
from agentcompass_agents.task_tools import McpServer, mcp_servers, skills_command
from agentcompass_harbor.benchmark import HarborBenchmark

from tests.harbor.taskdirs import REWARD_BY_EXIT, write_task

HARBOR_VENV = Path.home() / ".cache" / "agentcompass-tests" / "harbor-0.25.0-venv"
SERVERS_TOML = """\
[environment]
skills_dir = "/opt/skills"
[[environment.mcp_servers]]
name = "docs"
url = "http://docs:8000/sse"
[[environment.mcp_servers]]
name = "db"
transport = "http"
url = "http://db:9000/mcp"
[[environment.mcp_servers]]
name = "files"
transport = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/app"]
"""
SERVERS = (McpServer("docs", "sse", url="http://docs:8000/sse"),
           McpServer("db", "streamable-http", url="http://db:9000/mcp"),
           McpServer("files", "stdio", command="npx", args=("-y", "@modelcontextprotocol/server-filesystem", "/app")))


def ctx(servers: tuple[McpServer, ...] = SERVERS, skills: str | None = "/opt/skills") -> Context:
    return Context(agent_dir="/a", home="/a/home", instruction="x", instruction_file="/a/i.md", workdir="/app",
                   model="m", gateway={"OPENAI_BASE_URL": "http://gw/v1", "OPENAI_API_KEY": "t"}, max_turns=None,
                   deadline=None, mcp_servers=servers, skills_dir=skills)


def test_a_harbor_task_hands_its_servers_and_skills_to_the_harness(tmp_path: Path) -> None:
    write_task(tmp_path / "t", "tools", instruction="x", test=REWARD_BY_EXIT, toml=SERVERS_TOML)
    bench = HarborBenchmark(path=str(tmp_path / "t"))
    (task,) = bench.load_tasks(RunRequest(benchmark="harbor", harness="nop", model="mock"))
    assert mcp_servers(task.data) == SERVERS
    assert task.data["skills_dir"] == "/opt/skills"
    assert not task.metadata["harbor"]["unsupported"]


def test_claude_code_gets_user_scoped_servers() -> None:
    files = harness_class("claude-code")().files(ctx())
    assert json.loads(files["/a/home/.claude.json"]) == {"mcpServers": {
        "docs": {"type": "sse", "url": "http://docs:8000/sse"},
        "db": {"type": "http", "url": "http://db:9000/mcp"},
        "files": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/app"]},
    }}
    assert harness_class("claude-code")().files(ctx(servers=())) == {}


def test_codex_gets_mcp_server_tables_in_its_config() -> None:
    config = tomllib.loads(harness_class("codex")().files(ctx())["/a/home/.codex/config.toml"])
    assert config["mcp_servers"] == {
        "docs": {"url": "http://docs:8000/sse"},
        "db": {"url": "http://db:9000/mcp"},
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/app"]},
    }
    assert config["model_providers"]["agentcompass"]["base_url"] == "http://gw/v1"  # the rest stays


def test_gemini_cli_gets_mcp_servers_and_skills_in_its_settings() -> None:
    settings = json.loads(harness_class("gemini-cli")().files(ctx())["/a/home/.gemini/settings.json"])
    assert settings["mcpServers"] == {
        "docs": {"url": "http://docs:8000/sse"},
        "db": {"httpUrl": "http://db:9000/mcp"},
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/app"]},
    }
    assert settings["experimental"] == {"skills": True}


def test_opencode_gets_local_and_remote_servers() -> None:
    config = json.loads(harness_class("opencode")().env(ctx())["OPENCODE_CONFIG_CONTENT"])
    assert config["mcp"] == {
        "docs": {"type": "remote", "url": "http://docs:8000/sse", "oauth": False},
        "db": {"type": "remote", "url": "http://db:9000/mcp", "oauth": False},
        "files": {"type": "local", "command": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/app"]},
    }


@pytest.mark.parametrize(("agent", "where"), [("claude-code", ".claude/skills"), ("codex", ".agents/skills"),
                                              ("gemini-cli", ".gemini/skills"),
                                              ("opencode", ".config/opencode/skills")])
def test_skills_are_copied_where_each_agent_reads_them(tmp_path: Path, agent: str, where: str) -> None:
    skills = tmp_path / "skills"
    (skills / "pdf").mkdir(parents=True)
    (skills / "pdf" / "SKILL.md").write_text("---\nname: pdf\n---\nRead PDFs.\n")
    home = tmp_path / "home"
    command = skills_command(agent, str(skills), str(home))
    assert command is not None
    subprocess.run(["sh", "-c", command], check=True, timeout=30)
    assert (home / where / "pdf" / "SKILL.md").read_text().endswith("Read PDFs.\n")
    assert skills_command("aider", str(skills), str(home)) is None


HARBOR_CLAUDE = """
import json, sys, types
from harbor.agents.installed.claude_code import ClaudeCode
from harbor.models.task.config import MCPServerConfig
servers = [MCPServerConfig(**row) for row in json.loads(sys.stdin.read())]
me = types.SimpleNamespace(mcp_servers=servers, mcp_header_env=types.SimpleNamespace(refs={}))
print(ClaudeCode._build_register_mcp_servers_command(me))
"""


@pytest.mark.slow
def test_claude_codes_config_is_harbors() -> None:
    python = HARBOR_VENV / "bin" / "python"
    if not python.exists():
        if os.environ.get("CI"):
            pytest.fail(f"no harbor test environment at {HARBOR_VENV} (tests/export/test_atif_export.py makes it)")
        pytest.skip(f"no harbor test environment at {HARBOR_VENV}")
    rows: list[dict[str, Any]] = [{"name": s.name, "transport": s.transport, "url": s.url, "command": s.command,
                                   "args": list(s.args)} for s in SERVERS]
    done = subprocess.run([str(python), "-c", HARBOR_CLAUDE], input=json.dumps(rows), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    command = done.stdout.strip()  # echo '<json>' > $CLAUDE_CONFIG_DIR/.claude.json
    harbors = json.loads(command[len("echo '"):command.rindex("' >")])
    ours = json.loads(harness_class("claude-code")().files(ctx())["/a/home/.claude.json"])
    assert ours == harbors
