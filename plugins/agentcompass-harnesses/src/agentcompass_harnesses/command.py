"""``command``: bring your own agent. Runs the user's agent program inside the task's environment.

    agentcompass run harbor command openai/MODEL -b path=tasks/ --env docker \\
        --harness-arg command='my-agent --task {instruction_file}'

For each task the harness writes the instruction (``BaseBenchmark.instruction``) to a file in the environment,
then runs ``command`` with ``sh -c`` in the working directory, with these variables in its environment:

* ``OPENAI_BASE_URL``, ``OPENAI_API_BASE``, ``OPENAI_API_KEY``, ``AGENTCOMPASS_MODEL`` — the run's model
  gateway (``plan.model_endpoints["agent"].env()``): an OpenAI-compatible endpoint whose every call is metered
  into ``trajectories.jsonl``; the key is a token that ends with the task attempt, never a provider
  credential. (The gateway speaks OpenAI's chat-completions protocol only, so no Anthropic-style variables
  are set: an agent built on the Anthropic SDK needs an OpenAI-compatible mode.)
* ``AGENTCOMPASS_INSTRUCTION_FILE`` (the instruction), ``AGENTCOMPASS_ANSWER_FILE`` (where the agent may write
  its final answer), ``AGENTCOMPASS_TASK_ID``, ``AGENTCOMPASS_WORKDIR``.

Placeholders in ``command``, replaced by shell-quoted values: ``{instruction_file}``, ``{answer_file}``,
``{workdir}``, ``{task_id}``, ``{model}``, ``{instruction}`` (the text itself). Anything else in braces is left
alone, so ``${VAR}`` works.

The program's stdout and stderr are kept as artifacts (``plan.artifacts_dir/command/stdout.txt`` and
``stderr.txt``; their tails and the exit code in ``result.artifacts["command"]``). When it exits 0 the task is
``COMPLETED`` (the benchmark scores what it left), with the answer file's content, if it wrote one, as the
``final_answer``. A non-zero exit or a timeout ends the task as ``RUN_ERROR`` — unless ``check=false``, which
records them and lets the benchmark score the task anyway (what Harbor does).

Your agent's own files: ``--harness-arg upload=LOCAL:PATH`` copies the host file or directory ``LOCAL``
(relative to where you run agentcompass) into the environment at ``PATH`` (relative paths are in the working
directory) before the command runs; repeat it, or separate several with commas, for more. A ``LOCAL`` that does
not exist is a usage error before anything runs.

Options (``--harness-arg key=value``): ``command`` (required), ``upload``, ``timeout`` (seconds; the task's own
time limit,
``task.data["agent_timeout_sec"]``, applies too, whichever is shorter), ``check`` (default true),
``instruction_file`` (where to write the instruction; default ``/tmp/agentcompass/instruction.md``, or
``.agentcompass/instruction.md`` in the working directory when the environment refuses paths outside it, as
``local`` does).
"""

from __future__ import annotations

import asyncio
import posixpath
import re
import shlex
import time
from pathlib import Path
from typing import Any, ClassVar

from agentcompass.errors import InfrastructureError, UsageError
from agentcompass.runtime import (
    BaseHarness,
    EnvironmentSession,
    ExecutionPlan,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.runtime.logs import get_logger

from agentcompass_harnesses import common

log = get_logger(plugin="harnesses")

OPTIONS = ("command", "timeout", "check", "instruction_file", "upload")
PLACEHOLDERS = ("instruction_file", "answer_file", "workdir", "task_id", "model", "instruction")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")

DEFAULT_INSTRUCTION_FILE = "/tmp/agentcompass/instruction.md"
FALLBACK_INSTRUCTION_FILE = ".agentcompass/instruction.md"
ANSWER_NAME = "answer.txt"
#: Characters of stdout/stderr kept in ``result.artifacts`` (the files keep everything the environment gave).
TAIL_CHARS = 4000


def render(command: str, values: dict[str, str]) -> str:
    """``command`` with its placeholders replaced by shell-quoted values."""
    return _PLACEHOLDER.sub(lambda m: shlex.quote(values[m.group(1)]), command)


class CommandHarness(BaseHarness):
    """The ``command`` harness. See the module's documentation."""

    name: ClassVar[str] = "command"

    def __init__(self, **options: Any) -> None:
        common.check_options(self.name, options, OPTIONS)
        super().__init__(**options)
        command = str(options.get("command") or "").strip()
        if not command:
            raise UsageError(f"harness {self.name!r} needs the agent's command line: "
                             "--harness-arg command='my-agent --task {instruction_file}'")
        self.command = command
        self.timeout = (common.positive_number(self.name, "timeout", options["timeout"])
                        if options.get("timeout") not in (None, "") else None)
        self.check = common.boolean(self.name, "check", options.get("check", "true"))
        self.instruction_file = str(options.get("instruction_file") or "")
        self.uploads = parse_uploads(str(options.get("upload") or ""))

    async def run(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        if env is None:
            raise RuntimeError("the command harness needs the task's environment")
        for local, path in self.uploads:
            await env.upload(local, path)
        text = common.instruction(self.benchmark, task, prepared)
        instruction_file = await self._write_instruction(env, text)
        answer_file = posixpath.join(posixpath.dirname(instruction_file), ANSWER_NAME)
        endpoint = plan.model_endpoints.get("agent")
        values = {
            "instruction_file": instruction_file,
            "answer_file": answer_file,
            "workdir": str(env.workdir),
            "task_id": task.task_id,
            "model": endpoint.model if endpoint is not None else "",
            "instruction": text,
        }
        variables = {
            **(endpoint.env() if endpoint is not None else {}),
            "AGENTCOMPASS_INSTRUCTION_FILE": instruction_file,
            "AGENTCOMPASS_ANSWER_FILE": answer_file,
            "AGENTCOMPASS_TASK_ID": task.task_id,
            "AGENTCOMPASS_WORKDIR": str(env.workdir),
        }
        rendered = render(self.command, values)
        limits = [(s, why) for s, why in ((self.timeout, "timeout"),
                                          (common.time_limit(task), f"the task's time limit "
                                                                    f"(task.data[{common.TIME_LIMIT_KEY!r}])"))
                  if s is not None]
        seconds, why = min(limits, key=lambda x: x[0]) if limits else (None, "")
        started = time.perf_counter()
        result = await env.exec(["sh", "-c", rendered], timeout=seconds, env=variables)
        elapsed = time.perf_counter() - started
        files = await asyncio.to_thread(_save_output, plan.artifacts_dir, result.stdout, result.stderr)
        answer = await _read_answer(env, answer_file)
        record = {
            "command": rendered,
            "returncode": None if result.timed_out else result.returncode,
            "timed_out": result.timed_out,
            "timeout_s": seconds,
            "seconds": round(elapsed, 6),
            "instruction_file": instruction_file,
            "stdout_tail": common.tail(result.stdout, TAIL_CHARS),
            "stderr_tail": common.tail(result.stderr, TAIL_CHARS),
            "files": files,
        }
        log.info("command.finished", task_id=task.task_id, returncode=result.returncode,
                 timed_out=result.timed_out, seconds=round(elapsed, 3))
        error = None
        if result.timed_out:
            error = f"the agent command timed out after {seconds:g} s ({why}) and was killed"
        elif result.returncode != 0:
            error = (f"the agent command exited with status {result.returncode}: "
                     f"{common.one_line(result.stderr or result.stdout) or '(no output)'}")
        if error and self.check:
            return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.RUN_ERROR,
                             error=error, error_phase="run", artifacts={"command": record})
        if error:
            record["error"] = error
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED,
                         final_answer=answer, artifacts={"command": record})

    async def _write_instruction(self, env: EnvironmentSession, text: str) -> str:
        """Write the instruction file; returns its absolute path in the environment."""
        candidates = [self.instruction_file] if self.instruction_file else [DEFAULT_INSTRUCTION_FILE,
                                                                            FALLBACK_INSTRUCTION_FILE]
        failure: Exception | None = None
        for path in candidates:
            try:
                await env.write_text(path, text)
            except InfrastructureError:
                raise
            except Exception as exc:  # the environment refuses the path (local: outside the workdir)
                failure = exc
                continue
            return path if path.startswith("/") else posixpath.join(str(env.workdir), path)
        raise RuntimeError(f"cannot write the instruction file ({', '.join(candidates)}): {failure}")


def parse_uploads(value: str) -> list[tuple[Path, str]]:
    """``"LOCAL:PATH,LOCAL:PATH"`` → ``[(absolute LOCAL, PATH), ...]``; a usage error naming a bad entry."""
    out: list[tuple[Path, str]] = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        local, sep, path = entry.rpartition(":")
        if not sep or not local or not path:
            raise UsageError(f"harness 'command' option upload={entry!r}: expected LOCAL:PATH, e.g. "
                             "--harness-arg upload=./my_agent:/opt/agent")
        source = Path(local).expanduser().resolve()
        if not source.exists():
            raise UsageError(f"harness 'command' option upload={entry!r}: {local} does not exist here "
                             f"(looked for {source})")
        out.append((source, path))
    return out


def _save_output(artifacts_dir: str, stdout: str, stderr: str) -> list[str]:
    if not artifacts_dir:
        return []
    directory = Path(artifacts_dir) / "command"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "stdout.txt").write_text(stdout, encoding="utf-8")
    (directory / "stderr.txt").write_text(stderr, encoding="utf-8")
    return ["command/stdout.txt", "command/stderr.txt"]


async def _read_answer(env: EnvironmentSession, path: str) -> str | None:
    try:
        data = await env.read_bytes(path)
    except InfrastructureError:
        raise
    except Exception:  # no answer file: the agent gave no answer
        return None
    return data.decode("utf-8", errors="replace").strip() or None
