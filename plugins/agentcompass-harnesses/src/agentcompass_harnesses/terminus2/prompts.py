"""What Terminus 2 says to the model, word for word as Harbor 0.25.0's ``terminus_2.py`` says it: the prompt
templates (``templates/``, copied from Harbor), the completion confirmation, the parse-error and warning
prompts, the terminal output limit, and the three context-summarisation prompts."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

Parser = Literal["json", "xml"]
PARSERS: tuple[Parser, ...] = ("json", "xml")

_TEMPLATES = Path(__file__).parent / "templates"


@cache
def prompt_template(parser: Parser) -> str:
    """The first prompt's template (``{instruction}``, ``{terminal_state}``)."""
    return (_TEMPLATES / f"terminus-{parser}-plain.txt").read_text(encoding="utf-8")


@cache
def timeout_template() -> str:
    return (_TEMPLATES / "timeout.txt").read_text(encoding="utf-8")


def error_response_type(parser: Parser) -> str:
    return "JSON response" if parser == "json" else "response"


def completion_confirmation(parser: Parser, terminal_output: str) -> str:
    again = ('include "task_complete": true in your JSON response again.' if parser == "json"
             else "include <task_complete>true</task_complete> again.")
    return (f"Current terminal state:\n{terminal_output}\n\n"
            "Are you sure you want to mark the task as complete? "
            "This will trigger your solution to be graded and you won't be able to "
            f"make any further corrections. If so, {again}")


def parse_error_prompt(parser: Parser, feedback: str) -> str:
    return (f"Previous response had parsing errors:\n{feedback}\n\n"
            f"Please fix these issues and provide a proper {error_response_type(parser)}.")


def warnings_prompt(feedback: str, terminal_output: str) -> str:
    return f"Previous response had warnings:\n{feedback}\n\n{limit_output_length(terminal_output)}"


def limit_output_length(output: str, max_bytes: int = 10000) -> str:
    """``output`` cut to ``max_bytes`` UTF-8 bytes, keeping its first and last halves (Harbor's
    ``_limit_output_length``)."""
    if len(output.encode("utf-8")) <= max_bytes:
        return output
    portion_size = max_bytes // 2
    output_bytes = output.encode("utf-8")
    first_portion = output_bytes[:portion_size].decode("utf-8", errors="ignore")
    last_portion = output_bytes[-portion_size:].decode("utf-8", errors="ignore")
    omitted_bytes = len(output_bytes) - len(first_portion.encode("utf-8")) - len(last_portion.encode("utf-8"))
    return (f"{first_portion}\n[... output limited to {max_bytes} bytes; "
            f"{omitted_bytes} interior bytes omitted ...]\n{last_portion}")


def output_limit_error(limit: str) -> str:
    return ("ERROR!! NONE of the actions you just requested were performed "
            f"because you exceeded {limit}. "
            f"Your outputs must be less than {limit}. Re-issue this request, "
            f"breaking it into chunks each of which is less than {limit}.")


# -- context summarisation (Harbor's ``_summarize``) -----------------------------------------------------------


def summary_prompt(original_instruction: str) -> str:
    return f"""You are about to hand off your work to another AI agent.
            Please provide a comprehensive summary of what you have
            accomplished so far on this task:

Original Task: {original_instruction}

Based on the conversation history, please provide a detailed summary covering:
1. **Major Actions Completed** - List each significant command you executed
            and what you learned from it.
2. **Important Information Learned** - A summary of crucial findings, file
            locations, configurations, error messages, or system state discovered.
3. **Challenging Problems Addressed** - Any significant issues you
            encountered and how you resolved them.
4. **Current Status** - Exactly where you are in the task completion process.


Be comprehensive and detailed. The next agent needs to understand everything
            that has happened so far in order to continue."""


def question_prompt(original_instruction: str, summary: str, current_screen: str) -> str:
    return f"""You are picking up work from a previous AI agent on this task:

**Original Task:** {original_instruction}

**Summary from Previous Agent:**
{summary}

**Current Terminal Screen:**
{current_screen}

Please begin by asking several questions (at least five, more if necessary)
about the current state of the solution that are not answered in the summary
from the prior agent. After you ask these questions you will be on your own,
so ask everything you need to know."""


def answer_request_prompt(questions: str) -> str:
    return ("The next agent has a few questions for you, please answer each of them one by one in detail:\n\n"
            + questions)


def handoff_prompt(answers: str) -> str:
    return ("Here are the answers the other agent provided.\n\n" + answers + "\n\n"
            "Continue working on this task from where the previous agent left off."
            " You can no longer ask questions. Please follow the spec to interact with "
            "the terminal.")


def short_summary_prompt(original_instruction: str, limited_screen: str) -> str:
    return (f"Briefly continue this task: {original_instruction}\n\nCurrent state: {limited_screen}\n\n"
            "Next steps (2-3 sentences):")
