"""``react``: a tool-calling agent loop over the run's agent model, acting in the task's environment.

Each turn is one call of ``plan.models["agent"]`` (metered into ``trajectories.jsonl`` like every call) with
the tools ``bash``, ``read_file``, ``write_file`` and ``submit`` (:mod:`agentcompass_harnesses.tools`); the
tool calls of the reply run in the environment, in order, and their outputs go back to the model. The loop
stops, recording the reason in ``result.artifacts["react"]["stop_reason"]``:

* ``submit`` — the model called ``submit``; its ``answer`` is the result's ``final_answer``;
* ``no_tool_call`` — the model replied without a tool call after it had been nudged: the first reply
  without a tool call gets one nudge to go on (once per task), a later one ends the loop; that reply's
  text is the ``final_answer``;
* ``max_turns`` — ``max_turns`` model calls were made (``final_answer`` stays ``None``).

Those end the task ``COMPLETED`` (the benchmark scores whatever the agent left). These end it ``RUN_ERROR``:

* ``model_error`` — a model call failed (after the provider's own retries): the error names the cause;
* ``context_overflow`` — the conversation does not fit the model's context even with the old tool outputs
  removed (see :mod:`agentcompass_harnesses.context`);
* ``time_limit`` — the task's own time limit (``task.data["agent_timeout_sec"]``) passed.

Options (``--harness-arg key=value``): ``max_turns`` (default 30), ``max_tokens`` (tokens per attempt, default
1,000,000, ``0``: no limit; past it the attempt ends as ``LIMIT_REACHED``), ``command_timeout`` (seconds per ``bash``
call, default 120), ``system_prompt`` (text, or ``@FILE`` to read it from a file; ``{workdir}`` and
``{command_timeout}`` in it are replaced), ``max_output`` (characters of one tool output the model sees,
default 16000), ``max_context_chars`` (the conversation's size before old tool outputs are removed, default
400000, about 100k tokens).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from agentcompass.runtime import (
    AttemptLimits,
    BaseHarness,
    EnvironmentSession,
    ExecutionPlan,
    ModelError,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.runtime.harness import limits_from_options
from agentcompass.runtime.logs import get_logger

from agentcompass_harnesses import common
from agentcompass_harnesses.context import ContextKeeper, for_model, is_overflow, size
from agentcompass_harnesses.tools import Tools, schemas

log = get_logger(plugin="harnesses")

DEFAULT_SYSTEM_PROMPT = """\
You are an autonomous agent solving a task in a Linux environment. You act only through your tools:
- bash: run a shell command (each call starts a new shell in the working directory, {workdir}; a call is \
killed after {command_timeout} seconds; long output is cut);
- read_file and write_file: read or replace a text file (relative paths are relative to the working directory);
- submit: finish the task, with your final answer.
Work step by step: look around, act, and check your work. Nobody will answer questions, so decide for \
yourself. When the task is done, call submit."""

NUDGE = ("You replied without calling a tool. Go on with the task using the tools, and call submit with your "
         "final answer when it is done.")

OPTIONS = ("max_turns", "max_tokens", "command_timeout", "system_prompt", "max_output", "max_context_chars")
#: Times one turn's call is retried after shrinking the conversation for a context overflow.
OVERFLOW_RETRIES = 6


class ReactHarness(BaseHarness):
    """The ``react`` harness. See the module's documentation."""

    name: ClassVar[str] = "react"
    default_limits: ClassVar[AttemptLimits] = common.REACT_LIMITS

    def __init__(self, **options: Any) -> None:
        common.check_options(self.name, options, OPTIONS)
        super().__init__(**options)
        self.max_turns = int(common.positive_number(self.name, "max_turns", options.get("max_turns", 30),
                                                    integer=True))
        self.command_timeout = common.positive_number(self.name, "command_timeout",
                                                      options.get("command_timeout", 120))
        self.max_output = int(common.positive_number(self.name, "max_output", options.get("max_output", 16000),
                                                     integer=True))
        self.max_context_chars = int(common.positive_number(
            self.name, "max_context_chars", options.get("max_context_chars", 400_000), integer=True))
        self.limits = limits_from_options(self.name, {k: v for k, v in options.items() if k == "max_tokens"},
                                          self.default_limits)
        self.system_prompt = (common.text_or_file(self.name, "system_prompt", options["system_prompt"])
                              if "system_prompt" in options else DEFAULT_SYSTEM_PROMPT)

    def attempt_limits(self) -> AttemptLimits:
        return self.limits

    async def run(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        if env is None:
            raise RuntimeError("the react harness needs the task's environment")
        model = plan.models.get("agent")
        if model is None:
            raise RuntimeError("the react harness needs the agent model (plan.models['agent'])")
        instruction = common.instruction(self.benchmark, task, prepared)
        loop = _Loop(self, task, env, model, instruction)
        limit = common.time_limit(task)
        try:
            async with asyncio.timeout(limit):
                await loop.run()
        except TimeoutError:
            loop.stop("time_limit", f"the agent exceeded the task's time limit of {limit:g} s "
                                    f"(task.data[{common.TIME_LIMIT_KEY!r}])")
        return loop.result()


class _Loop:
    """One task's conversation."""

    def __init__(self, harness: ReactHarness, task: TaskSpec, env: EnvironmentSession, model: Any,
                 instruction: str) -> None:
        self.h, self.task, self.env, self.model = harness, task, env, model
        prompt = (harness.system_prompt.replace("{workdir}", str(env.workdir))
                  .replace("{command_timeout}", f"{harness.command_timeout:g}"))
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": prompt},
            {"role": "user", "content": instruction},
        ]
        self.tools = Tools(env, command_timeout=harness.command_timeout, max_output=harness.max_output)
        self.schemas = schemas(harness.command_timeout)
        self.context = ContextKeeper(harness.max_context_chars)
        self.turns = 0
        self.tool_calls = 0
        self.tool_errors = 0
        self.bash_calls = 0
        self.bash_seconds = 0.0
        self.bash_timeouts = 0
        self.nudged = False
        self.stop_reason: str | None = None
        self.error: str | None = None
        self.answer: str | None = None
        self.started = time.perf_counter()

    def stop(self, reason: str, error: str | None = None) -> None:
        if self.stop_reason is None:
            self.stop_reason, self.error = reason, error

    async def run(self) -> None:
        while self.stop_reason is None:
            if self.turns >= self.h.max_turns:
                self.stop("max_turns")
                return
            self.turns += 1
            response = await self._call()
            if response is None:
                return
            message = {"role": "assistant", "content": response.message.get("content")}
            calls = [_normalized(c, self.turns, i) for i, c in enumerate(response.tool_calls)]
            if calls:
                message["tool_calls"] = calls
            self.messages.append(message)
            if not calls:
                if self.nudged:
                    self.answer = response.content or None
                    self.stop("no_tool_call")
                    return
                self.nudged = True
                self.messages.append({"role": "user", "content": NUDGE})
                continue
            for call in calls:
                function = call.get("function") or {}
                outcome = await self.tools.call(str(function.get("name") or ""), function.get("arguments"))
                self.tool_calls += 1
                self.tool_errors += outcome.error
                if function.get("name") == "bash":
                    self.bash_calls += 1
                    self.bash_seconds += outcome.seconds
                    self.bash_timeouts += outcome.timed_out
                self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": outcome.content})
                if outcome.submitted:
                    self.answer = outcome.answer
                    self.stop("submit")
                    return

    async def _call(self) -> Any:
        """One model call, shrinking the conversation first when it is over budget and again when the
        provider says it does not fit. ``None`` when the loop must stop."""
        self.context.fit(self.messages, self.turns)
        for _ in range(OVERFLOW_RETRIES + 1):
            try:
                return await self.model.chat(for_model(self.messages), tools=self.schemas)
            except ModelError as exc:
                if not is_overflow(exc):
                    self.stop("model_error", f"model call failed: {exc}")
                    return None
                self.context.overflow_errors += 1
                target = int(min(self.context.max_chars, size(self.messages)) * 0.5)
                if not self.context.fit(self.messages, self.turns, reason="overflow", target=target):
                    self.stop("context_overflow",
                              f"context overflow: the conversation does not fit the model's context even with "
                              f"every old tool output removed ({exc})")
                    return None
                log.info("react.context_shrunk", task_id=self.task.task_id, turn=self.turns,
                         overflow_errors=self.context.overflow_errors)
        self.stop("context_overflow", f"context overflow: the model still refused the prompt after "
                                      f"{OVERFLOW_RETRIES} shrinks")
        return None

    def result(self) -> RunResult:
        record: Mapping[str, Any] = {
            "stop_reason": self.stop_reason,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "bash_calls": self.bash_calls,
            "bash_seconds": round(self.bash_seconds, 6),
            "bash_timeouts": self.bash_timeouts,
            "nudged": self.nudged,
            "seconds": round(time.perf_counter() - self.started, 6),
            "context": self.context.record(),
        }
        failed = self.stop_reason in ("model_error", "context_overflow", "time_limit")
        log.info("react.finished", task_id=self.task.task_id, stop_reason=self.stop_reason, turns=self.turns)
        return RunResult(
            task_id=self.task.task_id,
            category=self.task.category,
            status=TaskStatus.RUN_ERROR if failed else TaskStatus.COMPLETED,
            final_answer=None if failed else self.answer,
            error=self.error if failed else None,
            error_phase="run" if failed else None,
            artifacts={"react": record},
        )


def _normalized(call: Mapping[str, Any], turn: int, index: int) -> dict[str, Any]:
    """A tool call as it goes back into the conversation: an id (the tool's answer refers to it), the type,
    and the arguments as a JSON string, whatever shape the provider gave them in."""
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        function["arguments"] = json.dumps(arguments if arguments is not None else {})
    return {**call, "id": str(call.get("id") or f"call_{turn}_{index}"), "type": call.get("type") or "function",
            "function": function}
