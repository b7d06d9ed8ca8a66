"""Test support for example_interactive: scripted agents (responders of the kit's loopback OpenAI server and
scripted model, ``agentcompass.testing``), an emulation of the core's ``mock`` model policy, and a helper
that runs the runner as a real subprocess."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from agentcompass.testing import DEFAULT_API_KEY, Responder, text, tool_call
from agentcompass.testing import scripted as kit_scripted
from example_interactive import RUNNER_FILES

API_KEY = DEFAULT_API_KEY

#: What the core's `mock` model should score, task by task (agentcompass.builtin.mock_model).
EXPECTED_MOCK_SCORES = {
    "create_basic": 1.0,
    "create_with_description": 1.0,
    "update_complete": 1.0,
    "update_two_tasks": 0.0,
    "policy_unknown_user": 1.0,
    "policy_reopen_completed": 0.0,
    "policy_other_users_task": 0.0,
    "policy_delete_request": 1.0,
    "multi_lookup_then_update": 0.0,
    "multi_create_and_update": 1.0,
    "multi_create_then_complete": 0.0,
}

# An agent answers a chat request: a message dict, or (status, body) for an HTTP error (the kit's responders).
Agent = Responder


def scripted(*steps: dict[str, Any] | tuple[int, Any]) -> Agent:
    """Answers with ``steps`` in order, then with a fixed text forever."""
    return kit_scripted(*steps, then=text("Is there anything else?"))


_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


class MockPolicy:
    """An emulation of the core ``mock`` model as the brief describes it (the runtime's own mock is the
    authority; this lets the task design be checked before it exists, under both readings of "word appears":
    as a substring or as a whole word, and of "``<prefix>_<digits>``": the parameter's own prefix or any)."""

    def __init__(self, *, whole_words: bool = False, any_prefix: bool = False) -> None:
        self.whole_words = whole_words
        self.any_prefix = any_prefix

    def _has(self, word: str, message: str) -> bool:
        if self.whole_words:
            return re.search(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])", message) is not None
        return word in message

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        last = messages[-1]
        if last["role"] == "tool":
            return text(f"Done: {str(last['content'])[:60]}")
        user = next((m for m in reversed(messages) if m["role"] == "user"), None)
        content = str(user["content"]) if user else ""
        lowered = content.lower()
        best = None
        for tool in body.get("tools") or []:
            fn = tool["function"]
            words = fn["name"].lower().split("_")
            if all(self._has(w, lowered) for w in words) and (best is None or len(words) > best[0]):
                best = (len(words), fn)
        if best is None:
            return text(f"I understand: {content[:60]}")
        fn = best[1]
        quoted = [a or b for a, b in _QUOTED.findall(content)]
        arguments: dict[str, str] = {}
        for pname, schema in fn["parameters"]["properties"].items():
            value = None
            if pname.endswith("_id"):
                prefix = r"[A-Za-z]+" if self.any_prefix else re.escape(pname[: -len("_id")])
                m = re.search(rf"\b{prefix}_\d+\b", content)
                value = m.group(0) if m else None
            elif "enum" in schema:
                value = next((v for v in schema["enum"] if v in lowered), None)
            elif quoted:
                value = quoted.pop(0)
            if value is not None:
                arguments[pname] = value
        if any(r not in arguments for r in fn["parameters"].get("required", [])):
            return text(f"I understand: {content[:60]}")
        return tool_call(fn["name"], **arguments)


# -- the runner as a subprocess ------------------------------------------------------------------


def copy_runner(dest: Path) -> Path:
    """Copy the runner's stdlib files, exactly as prepare_task does, into ``dest/example_interactive``."""
    package = resources.files("example_interactive")
    target = dest / "example_interactive"
    target.mkdir(parents=True, exist_ok=True)
    for name in RUNNER_FILES:
        (target / name).write_text(package.joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")
    return target


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A subprocess environment where only the copied package can provide ``example_interactive``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTCOMPASS_"))}
    env.pop("PYTHONPATH", None)
    env.update(extra or {})
    return env


def system_python() -> str:
    """A python3 outside the project's virtualenv when there is one (the runner must need nothing else)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if Path(candidate).exists():
            return candidate
    return shutil.which("python3") or sys.executable


def run_runner(
    workdir: Path,
    request: Mapping[str, Any],
    env: Mapping[str, str] | None,
    *,
    command: str = "run",
    timeout: float = 60,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """Run ``python3 -m example_interactive.runner COMMAND`` in ``workdir`` (which holds the copied package).
    Returns the process and the parsed output (``None`` when there is none)."""
    io = workdir / "io"
    io.mkdir(exist_ok=True)
    (io / "request.json").write_text(json.dumps(request))
    out = io / "result.json"
    proc = subprocess.run(
        [
            system_python(),
            "-m",
            "example_interactive.runner",
            command,
            "--request",
            "io/request.json",
            "--output",
            "io/result.json",
        ],
        cwd=workdir,
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    payload = json.loads(out.read_text()) if out.exists() else None
    return proc, payload
