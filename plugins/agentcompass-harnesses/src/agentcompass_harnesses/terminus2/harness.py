"""``terminus-2``: Harbor's Terminus 2 agent (the one Terminal-Bench's leaderboard is built on) as a harness.

A tmux session in the task's environment is the agent's only tool. Each episode the model gets a prompt (the
first: Harbor's template with the instruction and the screen; later: what the terminal printed), answers in
Harbor's JSON (or XML) format with ``analysis``, ``plan``, ``commands`` (keystrokes and a wait, at most 60 s)
and ``task_complete``; the keystrokes are sent, the harness waits, and the new output is the next prompt.
``task_complete`` is asked to be confirmed once; the second one in a row ends the loop. A reply that does not
parse gets Harbor's parse-error prompt; warnings are shown with the next output. The conversation is summarised
and handed over (:mod:`.summarize`) when its estimated size leaves fewer than
``proactive_summarization_threshold`` tokens of ``context_limit`` free, or when the provider refuses it as too
long. The prompts and the parsers are Harbor 0.25.0's, word for word.

Stop reasons (``artifacts["terminus-2"]["stop_reason"]``): ``task_complete``, ``max_turns``, ``session_ended``
(the tmux session went away) end the task ``COMPLETED`` (the benchmark scores what the agent left);
``model_error``, ``tmux_error`` and ``time_limit`` end it ``RUN_ERROR``.
"""

from __future__ import annotations

import asyncio
import time
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
from agentcompass_harnesses.terminus2 import prompts
from agentcompass_harnesses.terminus2.chat import Chat, ContextOverflow, OutputTruncated, count_tokens
from agentcompass_harnesses.terminus2.json_parser import TerminusJSONPlainParser
from agentcompass_harnesses.terminus2.summarize import FAILURES, after_overflow, summarize
from agentcompass_harnesses.terminus2.tmux import TmuxError, TmuxSession
from agentcompass_harnesses.terminus2.xml_parser import TerminusXMLPlainParser

log = get_logger(plugin="harnesses")

NAME = "terminus-2"
OPTIONS = ("max_turns", "max_tokens", "parser", "enable_summarize", "proactive_summarization_threshold",
           "context_limit", "tmux_pane_width", "tmux_pane_height")
#: Harbor's defaults: no practical turn limit, and LiteLLM's fallback context for a model it does not know.
DEFAULT_MAX_TURNS = 1_000_000
DEFAULT_CONTEXT_LIMIT = 1_000_000
#: Longest wait one command may ask for, in seconds (Harbor's ``min(duration, 60)``).
MAX_DURATION = 60


class Terminus2Harness(BaseHarness):
    """The ``terminus-2`` harness. See the module's documentation."""

    name: ClassVar[str] = NAME
    default_limits: ClassVar[AttemptLimits] = AttemptLimits()

    def __init__(self, **options: Any) -> None:
        common.check_options(self.name, options, OPTIONS)
        super().__init__(**options)

        def whole(key: str, default: int) -> int:
            return int(common.positive_number(self.name, key, options.get(key, default), integer=True))

        self.max_turns = whole("max_turns", DEFAULT_MAX_TURNS)
        self.context_limit = whole("context_limit", DEFAULT_CONTEXT_LIMIT)
        self.pane_width = whole("tmux_pane_width", 160)
        self.pane_height = whole("tmux_pane_height", 40)
        threshold = str(options.get("proactive_summarization_threshold", 8000)).strip()
        self.threshold = 0 if threshold == "0" else whole("proactive_summarization_threshold", 8000)
        self.enable_summarize = common.boolean(self.name, "enable_summarize", options.get("enable_summarize", True))
        parser = str(options.get("parser", "json")).strip().lower()
        if parser not in prompts.PARSERS:
            raise common.UsageError(f"harness {self.name!r}: option 'parser' must be json or xml, got {parser!r}")
        self.parser: prompts.Parser = "json" if parser == "json" else "xml"
        self.limits = limits_from_options(self.name, {k: v for k, v in options.items() if k == "max_tokens"},
                                          self.default_limits)

    def attempt_limits(self) -> AttemptLimits:
        return self.limits

    async def run(self, task: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
                  env: EnvironmentSession | None = None) -> RunResult:
        if env is None:
            raise RuntimeError("the terminus-2 harness needs the task's environment")
        model = plan.models.get("agent")
        if model is None:
            raise RuntimeError("the terminus-2 harness needs the agent model (plan.models['agent'])")
        loop = Episodes(self, task, env, model, common.instruction(self.benchmark, task, prepared))
        limit = common.time_limit(task)
        try:
            async with asyncio.timeout(limit):
                await loop.run()
        except TimeoutError:
            loop.stop("time_limit", f"the agent exceeded the task's time limit of {limit:g} s "
                                    f"(task.data[{common.TIME_LIMIT_KEY!r}])")
        except TmuxError as exc:
            loop.stop("tmux_error", str(exc))
        finally:
            await loop.session.close()
        return loop.result()


class Episodes:
    """One task's Terminus 2 loop (Harbor's ``run`` and ``_run_agent_loop``)."""

    def __init__(self, harness: Terminus2Harness, task: TaskSpec, env: EnvironmentSession, model: Any,
                 instruction: str) -> None:
        self.h, self.task, self.instruction = harness, task, instruction
        self.session = TmuxSession(env, pane_width=harness.pane_width, pane_height=harness.pane_height)
        self.chat = Chat(model)
        self.parser = TerminusJSONPlainParser() if harness.parser == "json" else TerminusXMLPlainParser()
        self.episodes = 0
        self.summarizations = 0
        self.parse_errors = 0
        self.commands = 0
        self.pending_completion = False
        self.stop_reason: str | None = None
        self.error: str | None = None
        self.started = time.perf_counter()

    def stop(self, reason: str, error: str | None = None) -> None:
        if self.stop_reason is None:
            self.stop_reason, self.error = reason, error

    async def run(self) -> None:
        await self.session.start()
        terminal_state = prompts.limit_output_length(await self.session.get_incremental_output())
        prompt = prompts.prompt_template(self.h.parser).format(instruction=self.instruction,
                                                                terminal_state=terminal_state)
        for episode in range(self.h.max_turns):
            self.episodes = episode + 1
            if not await self.session.is_session_alive():
                self.stop("session_ended")
                return
            if self.h.enable_summarize and self.h.threshold:
                prompt = await self._proactive_summary(prompt)
            content = await self._query(prompt)
            if content is None:
                return
            result = self.parser.parse_response(content)
            feedback = ""
            if result.error:
                feedback += f"ERROR: {result.error}"
                if result.warning:
                    feedback += f"\nWARNINGS: {result.warning}"
            elif result.warning:
                feedback += f"WARNINGS: {result.warning}"
            if feedback and "ERROR:" in feedback:
                self.parse_errors += 1
                prompt = prompts.parse_error_prompt(self.h.parser, feedback)
                continue
            terminal_output = await self._execute(
                [(c.keystrokes, min(c.duration, MAX_DURATION)) for c in result.commands])
            was_pending = self.pending_completion
            if result.is_task_complete:
                if self.pending_completion:
                    observation = terminal_output
                else:
                    self.pending_completion = True
                    observation = prompts.completion_confirmation(self.h.parser, terminal_output)
            else:
                self.pending_completion = False
                observation = (prompts.warnings_prompt(feedback, terminal_output)
                               if feedback and "WARNINGS:" in feedback
                               else prompts.limit_output_length(terminal_output))
            if result.is_task_complete and was_pending:
                self.stop("task_complete")
                return
            prompt = observation
        self.stop("max_turns")

    async def _proactive_summary(self, prompt: str) -> str:
        free = self.h.context_limit - count_tokens(self.chat.messages)
        if free >= self.h.threshold:
            return prompt
        try:
            handoff = await summarize(self.chat, self.instruction, self.session)
        except FAILURES as exc:
            log.info("terminus2.summary_failed", task_id=self.task.task_id, error=str(exc)[:300])
            return prompt
        self.summarizations += 1
        log.info("terminus2.summarized", task_id=self.task.task_id, episode=self.episodes, free_tokens=free)
        return handoff

    async def _query(self, prompt: str) -> str | None:
        """The model's answer to ``prompt`` (Harbor's ``_query_llm``); ``None`` when the loop must stop."""
        try:
            return await self.chat.chat(prompt)
        except ContextOverflow:
            if not self.h.enable_summarize:
                self.stop("model_error", "the conversation does not fit the model's context and summarisation "
                                         "is off (enable_summarize=false)")
                return None
            self.summarizations += 1
            log.info("terminus2.context_overflow", task_id=self.task.task_id, episode=self.episodes)
            return await after_overflow(self.chat, self.instruction, self.session, self.h.context_limit)
        except OutputTruncated as exc:
            return await self._after_truncation(prompt, exc.content)
        except ModelError as exc:
            self.stop("model_error", f"model call failed: {exc}")
            return None

    async def _after_truncation(self, prompt: str, truncated: str) -> str | None:
        salvage = getattr(self.parser, "salvage_truncated_response", None)
        if salvage is not None:
            salvaged, _ = salvage(truncated)
            if salvaged:
                return str(salvaged)
        message = prompts.output_limit_error("the maximum output length")
        try:
            warning = self.parser.parse_response(truncated).warning
        except Exception:  # Harbor ignores a parser failure here too
            warning = ""
        if warning:
            message += f"\n\nParser warnings from your truncated response:\n{warning}"
        self.chat.messages.extend([{"role": "user", "content": prompt},
                                   {"role": "assistant", "content": truncated}])
        return await self._query(message)

    async def _execute(self, commands: list[tuple[str, float]]) -> str:
        for keystrokes, duration in commands:
            self.commands += 1
            try:
                await self.session.send_keys(keystrokes, block=False, min_timeout_sec=duration)
            except TimeoutError:
                return prompts.timeout_template().format(
                    timeout_sec=duration, command=keystrokes,
                    terminal_state=prompts.limit_output_length(await self.session.get_incremental_output()))
        return prompts.limit_output_length(await self.session.get_incremental_output())

    def result(self) -> RunResult:
        record = {
            "stop_reason": self.stop_reason,
            "episodes": self.episodes,
            "commands": self.commands,
            "parse_errors": self.parse_errors,
            "summarizations": self.summarizations,
            "model_calls": self.chat.calls,
            "model_retries": self.chat.retries,
            "parser": self.h.parser,
            "tmux": self.session.tmux_source,
            "seconds": round(time.perf_counter() - self.started, 6),
        }
        failed = self.stop_reason in ("model_error", "tmux_error", "time_limit")
        log.info("terminus2.finished", task_id=self.task.task_id, stop_reason=self.stop_reason,
                 episodes=self.episodes)
        return RunResult(
            task_id=self.task.task_id,
            category=self.task.category,
            status=TaskStatus.RUN_ERROR if failed else TaskStatus.COMPLETED,
            error=self.error if failed else None,
            error_phase="run" if failed else None,
            artifacts={NAME: record},
        )
