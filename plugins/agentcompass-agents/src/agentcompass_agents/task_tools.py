"""What a task hands its agent besides the instruction: MCP servers and a skills directory
(``task.data["mcp_servers"]``, ``task.data["skills_dir"]``, as the ``harbor`` benchmark sets them from a task's
``[environment] mcp_servers`` and ``skills_dir``), in each installed agent's own configuration — the formats
Harbor 0.25's installed agents write:

* ``claude-code``: ``$HOME/.claude.json`` ``{"mcpServers": {NAME: {"type": "stdio", "command", "args"} |
  {"type": "sse" | "http", "url"}}}``; skills in ``$HOME/.claude/skills/``;
* ``codex``: ``[mcp_servers.NAME]`` tables in ``config.toml`` (``command``/``args``, or ``url``); skills in
  ``$HOME/.agents/skills/``;
* ``gemini-cli``: ``settings.json`` ``mcpServers`` (``command``/``args``, ``httpUrl`` for streamable HTTP,
  ``url`` for SSE) and ``experimental.skills``; skills in ``$HOME/.gemini/skills/``;
* ``opencode``: the config's ``mcp`` (``{"type": "local", "command": [...]}`` or ``{"type": "remote", "url",
  "oauth": false}``); skills in ``$HOME/.config/opencode/skills/``.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TRANSPORTS = ("stdio", "sse", "streamable-http")

#: Where each agent looks for skills, under its ``$HOME``.
SKILLS_DIRS = {
    "claude-code": ".claude/skills",
    "codex": ".agents/skills",
    "gemini-cli": ".gemini/skills",
    "opencode": ".config/opencode/skills",
}


@dataclass(frozen=True)
class McpServer:
    name: str
    transport: str = "sse"
    url: str | None = None
    command: str | None = None
    args: tuple[str, ...] = field(default_factory=tuple)


def mcp_servers(data: Mapping[str, Any]) -> tuple[McpServer, ...]:
    """The MCP servers of a task's data (``[{name, transport, url | command, args}]``)."""
    out = []
    for row in data.get("mcp_servers") or ():
        transport = str(row.get("transport") or "sse")
        transport = "streamable-http" if transport == "http" else transport
        if transport not in TRANSPORTS:
            raise ValueError(f"MCP server {row.get('name')!r}: transport must be one of {', '.join(TRANSPORTS)}")
        out.append(McpServer(name=str(row["name"]), transport=transport, url=row.get("url"),
                             command=row.get("command"), args=tuple(str(a) for a in row.get("args") or ())))
    return tuple(out)


def claude_code(servers: Sequence[McpServer]) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for s in servers:
        if s.transport == "stdio":
            entries[s.name] = {"type": "stdio", "command": s.command, "args": list(s.args)}
        else:
            entries[s.name] = {"type": "http" if s.transport == "streamable-http" else s.transport, "url": s.url}
    return {"mcpServers": entries}


def codex_toml(servers: Sequence[McpServer]) -> str:
    lines = []
    for s in servers:
        lines.append(f"[mcp_servers.{json.dumps(s.name)}]")
        if s.transport == "stdio":
            lines += [f"command = {json.dumps(s.command)}", f"args = {json.dumps(list(s.args))}"]
        else:
            lines.append(f"url = {json.dumps(s.url)}")
    return "\n".join(lines) + ("\n" if lines else "")


def gemini_cli(servers: Sequence[McpServer]) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for s in servers:
        if s.transport == "stdio":
            entries[s.name] = {"command": s.command, "args": list(s.args)}
        elif s.transport == "streamable-http":
            entries[s.name] = {"httpUrl": s.url}
        else:
            entries[s.name] = {"url": s.url}
    return entries


def opencode(servers: Sequence[McpServer]) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for s in servers:
        if s.transport == "stdio":
            entries[s.name] = {"type": "local", "command": [s.command, *s.args] if s.command else []}
        else:
            entries[s.name] = {"type": "remote", "url": s.url, "oauth": False}
    return entries


def skills_command(agent: str, skills_dir: str | None, home: str) -> str | None:
    """The shell command that copies a task's skills where ``agent`` reads them (``None``: nothing to do)."""
    if not skills_dir or agent not in SKILLS_DIRS:
        return None
    target = posixpath.join(home, SKILLS_DIRS[agent])
    return (f"mkdir -p {shlex.quote(target)} && "
            f"cp -r {shlex.quote(skills_dir)}/* {shlex.quote(target)}/ 2>/dev/null || true")
