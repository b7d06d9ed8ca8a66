"""Reading the agents' own trajectories: JSON lines on stdout and session files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``text``, one per line; other lines (log noise) are skipped."""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value


def files_under(root: Path | None, pattern: str) -> list[Path]:
    """Files matching ``pattern`` under the downloaded agent directory, oldest name first."""
    if root is None:
        return []
    base = root / "files"
    return sorted(p for p in base.rglob(pattern) if p.is_file()) if base.is_dir() else []


def content_text(content: Any) -> str:
    """The text of an Anthropic-style content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text") or "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def gateway_root(gateway: dict[str, str] | Any) -> str:
    """The gateway's root URL (without ``/v1``), from its OpenAI-style base URL."""
    base = str(gateway.get("OPENAI_BASE_URL") or "")
    return base[: -len("/v1")] if base.endswith("/v1") else base
