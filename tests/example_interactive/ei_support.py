"""Test support for example_interactive: a tiny OpenAI-compatible server, scripted agents, an emulation of
the core's ``mock`` model policy, a throwaway local EnvironmentSession, and a helper that runs the runner as
a real subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from agentcompass.runtime import EnvironmentSession, ExecResult
from example_interactive import RUNNER_FILES

API_KEY = "test-token-123"

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

# An agent answers a chat request: a message dict, or (status, body) for an HTTP error.
Agent = Callable[[dict[str, Any]], "dict[str, Any] | tuple[int, Any]"]


class FakeOpenAI:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 that delegates to ``agent``."""

    def __init__(self, agent: Agent, *, api_key: str = API_KEY) -> None:
        self.agent = agent
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                outer.requests.append(body)
                auth = self.headers.get("Authorization")
                outer.auth_headers.append(auth)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if auth != f"Bearer {outer.api_key}":
                    return self._send(401, {"error": {"message": "invalid api key"}})
                answer = outer.agent(body)
                if isinstance(answer, tuple):
                    return self._send(*answer)
                message = {"role": "assistant", "content": None, **answer}
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(outer.requests)}",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    },
                )

            def _send(self, status: int, body: Any) -> None:
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def env(self, model: str = "scripted") -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": self.api_key, "AGENTCOMPASS_MODEL": model}

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


# -- agents --------------------------------------------------------------------------------------


def tool_call(name: str, call_id: str = "call_1", **arguments: Any) -> dict[str, Any]:
    return {
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def text(content: str) -> dict[str, Any]:
    return {"content": content}


def scripted(*steps: dict[str, Any] | tuple[int, Any]) -> Agent:
    """Answers with ``steps`` in order, then with a fixed text forever."""
    queue = list(steps)

    def agent(body: dict[str, Any]) -> dict[str, Any] | tuple[int, Any]:
        return queue.pop(0) if queue else text("Is there anything else?")

    return agent


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


# -- a throwaway local EnvironmentSession --------------------------------------------------------


class TempDirSession(EnvironmentSession):
    """A minimal local session over a directory: enough to drive the benchmark's phases in tests."""

    def __init__(self, workdir: Path, base_env: Mapping[str, str] | None = None) -> None:
        self.workdir = str(workdir)
        self.base_env = dict(base_env or {})
        self.execs: list[list[str]] = []

    def _path(self, path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() else Path(self.workdir) / p

    async def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        self.execs.append(list(argv))
        argv = list(argv)
        if argv and argv[0] == "python3":
            argv[0] = system_python()
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(self._path(cwd)) if cwd else self.workdir,
            env=clean_env({**self.base_env, **(env or {})}),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            out, err = await proc.communicate()
            return ExecResult(proc.returncode or -9, out.decode(), err.decode(), timed_out=True)
        return ExecResult(proc.returncode or 0, out.decode(), err.decode())

    async def read_bytes(self, path: str) -> bytes:
        return self._path(path).read_bytes()

    async def write_bytes(self, path: str, data: bytes) -> None:
        p = self._path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    async def upload(self, local_path: str | Path, path: str) -> None:
        _copy(Path(local_path), self._path(path))

    async def download(self, path: str, local_path: str | Path) -> None:
        shutil.copy(self._path(path), local_path)


def _copy(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, dirs_exist_ok=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
