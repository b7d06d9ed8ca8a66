"""The ``react`` harness's tools: OpenAI function-calling schemas and what each call does in the environment.

Every tool answers with text for the model; a failure the model can act on (a missing file, bad arguments, a
command that timed out) is reported in that text, never raised. A failure of the environment itself
(:class:`~agentcompass.errors.InfrastructureError`: the container went away) is raised, so the runtime records
it and may retry the attempt.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentcompass.errors import InfrastructureError, describe
from agentcompass.runtime import EnvironmentSession

from agentcompass_harnesses.common import clip

BASH, READ_FILE, WRITE_FILE, SUBMIT = "bash", "read_file", "write_file", "submit"

#: Runs ``bash -c COMMAND``, or ``sh -c COMMAND`` in an image without bash.
_SHELL = ["sh", "-c", 'if command -v bash >/dev/null 2>&1; then exec bash -c "$0"; else exec sh -c "$0"; fi']


def schemas(command_timeout: float) -> list[dict[str, Any]]:
    """The four tools, as OpenAI function-calling schemas."""

    def function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {"type": "object", "properties": properties, "required": list(properties),
                               "additionalProperties": False},
            },
        }

    return [
        function(
            BASH,
            "Run a shell command (bash) in the task's environment and get its exit code, stdout and stderr. "
            "Each call starts a new shell in the working directory (state such as `cd` does not carry over). "
            f"A call is killed after {command_timeout:g} seconds; long output is cut in the middle.",
            {"command": {"type": "string", "description": "The command line to run."}},
        ),
        function(
            READ_FILE,
            "Read a text file of the environment. Relative paths are relative to the working directory.",
            {"path": {"type": "string", "description": "The file's path."}},
        ),
        function(
            WRITE_FILE,
            "Write a text file of the environment (replacing it; parent directories are created). Relative "
            "paths are relative to the working directory.",
            {"path": {"type": "string", "description": "The file's path."},
             "content": {"type": "string", "description": "The file's complete new content."}},
        ),
        function(
            SUBMIT,
            "Finish the task. Call it once the task is done; `answer` is your final answer (or a one-line "
            "summary of what you did, when the task asks for no particular answer).",
            {"answer": {"type": "string", "description": "Your final answer."}},
        ),
    ]


@dataclass
class ToolOutcome:
    """What one tool call gave the model, and what the harness records of it."""

    content: str
    submitted: bool = False
    answer: str | None = None
    #: For ``bash``: the exit code (``None`` when the call timed out or could not start).
    returncode: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    error: bool = False


def parse_arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments: a JSON object (OpenAI sends it as a string)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the arguments are not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("the arguments must be a JSON object")
    return value


def _string(args: Mapping[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise ValueError(f"the argument {name!r} (a string) is missing" if value is None
                         else f"the argument {name!r} must be a string")
    return value


class Tools:
    """Runs tool calls in one environment session."""

    def __init__(self, env: EnvironmentSession, *, command_timeout: float, max_output: int) -> None:
        self.env = env
        self.command_timeout = command_timeout
        self.max_output = max_output

    async def call(self, name: str, raw_arguments: Any) -> ToolOutcome:
        started = time.perf_counter()
        try:
            args = parse_arguments(raw_arguments)
            if name == BASH:
                outcome = await self.bash(_string(args, "command"))
            elif name == READ_FILE:
                outcome = await self.read_file(_string(args, "path"))
            elif name == WRITE_FILE:
                outcome = await self.write_file(_string(args, "path"), _string(args, "content"))
            elif name == SUBMIT:
                answer = args.get("answer")
                answer = answer if isinstance(answer, str) else json.dumps(answer) if answer is not None else ""
                outcome = ToolOutcome("Submitted. The task is over.", submitted=True, answer=answer)
            else:
                outcome = ToolOutcome(
                    f"error: there is no tool {name!r}; the tools are {BASH}, {READ_FILE}, {WRITE_FILE}, {SUBMIT}",
                    error=True)
        except ValueError as exc:
            outcome = ToolOutcome(f"error: {name}: {exc}", error=True)
        outcome.seconds = time.perf_counter() - started
        return outcome

    async def bash(self, command: str) -> ToolOutcome:
        result = await self.env.exec([*_SHELL, command], timeout=self.command_timeout)
        parts = []
        if result.timed_out:
            parts.append(f"[the command timed out after {self.command_timeout:g} s and was killed; "
                         "its output so far follows]")
        else:
            parts.append(f"[exit code {result.returncode}]")
        if result.stdout:
            parts.append(result.stdout.rstrip("\n"))
        if result.stderr:
            parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
        if not result.stdout and not result.stderr:
            parts.append("(no output)")
        text = clip("\n".join(parts), self.max_output,
                    "redirect long output to a file and read parts of it with head, tail or grep")
        return ToolOutcome(text, returncode=None if result.timed_out else result.returncode,
                           timed_out=result.timed_out)

    async def read_file(self, path: str) -> ToolOutcome:
        try:
            data = await self.env.read_bytes(path)
        except InfrastructureError:
            raise
        except Exception as exc:  # a missing file, a directory, a path the environment refuses
            return ToolOutcome(f"error: cannot read {path!r}: {describe(exc)}", error=True)
        if b"\0" in data[:8192]:
            return ToolOutcome(f"{path!r} is a binary file of {len(data)} bytes; inspect it with bash "
                               "(e.g. `xxd FILE | head`)")
        text = data.decode("utf-8", errors="replace")
        if not text:
            return ToolOutcome(f"({path!r} is empty)")
        return ToolOutcome(clip(text, self.max_output, "read the rest with bash: sed -n 'A,Bp' FILE"))

    async def write_file(self, path: str, content: str) -> ToolOutcome:
        try:
            await self.env.write_text(path, content)
        except InfrastructureError:
            raise
        except Exception as exc:
            return ToolOutcome(f"error: cannot write {path!r}: {describe(exc)}", error=True)
        return ToolOutcome(f"Wrote {len(content.encode('utf-8'))} bytes to {path!r}.")
