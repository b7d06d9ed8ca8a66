"""What both harnesses share: option parsing, the task's instruction and time limit, output clipping.

The task's time limit: a benchmark may bound the agent's work on one task with ``task.data["agent_timeout_sec"]``
(seconds; the ``harbor`` benchmark sets it from ``task.toml``'s ``[agent] timeout_sec``). Both harnesses stop
the agent when it passes and end the task as ``RUN_ERROR``; the run phase's own timeout (``--timeout``) bounds
every task as well.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime import BaseBenchmark, PreparedTask, TaskSpec
from agentcompass.runtime.harness import AttemptLimits
from agentcompass.runtime.options import boolean as parse_boolean

#: Tokens (prompt and completion) one ``react`` attempt's model calls may use unless ``max_tokens=`` says
#: otherwise (``0``: no limit); past them the attempt ends as ``LIMIT_REACHED``. ``max_turns`` bounds its calls.
REACT_LIMITS = AttemptLimits(max_tokens=1_000_000)

#: The key of ``TaskSpec.data`` that states the task's own time limit for the agent, in seconds.
TIME_LIMIT_KEY = "agent_timeout_sec"

def check_options(harness: str, options: Mapping[str, Any], valid: Iterable[str]) -> None:
    """Reject options the harness does not know, listing the ones it does."""
    known = tuple(valid)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise UsageError(
            f"unknown option(s) {', '.join(repr(o) for o in unknown)} for harness {harness!r}; "
            f"valid options: {', '.join(known)}"
        )


def positive_number(harness: str, name: str, value: Any, *, integer: bool = False) -> float:
    """``value`` (a string from ``--harness-arg``) as a positive finite number."""
    try:
        number = int(str(value).strip()) if integer else float(str(value).strip())
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise UsageError(f"harness {harness!r}: option {name!r} must be {kind}, got {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise UsageError(f"harness {harness!r}: option {name!r} must be positive, got {value!r}")
    return number


def boolean(harness: str, name: str, value: Any) -> bool:
    return parse_boolean(f"harness {harness!r}: option", name, value)


def text_or_file(harness: str, name: str, value: Any) -> str:
    """An option's text: ``@PATH`` reads the file at PATH (on the host), anything else is the text itself."""
    text = str(value)
    if not text.startswith("@"):
        return text
    path = Path(text[1:]).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"harness {harness!r}: option {name}=@{path}: cannot read the file ({exc})") from None


def instruction(benchmark: BaseBenchmark | None, task: TaskSpec, prepared: PreparedTask) -> str:
    """The task's instruction, from the benchmark the harness is bound to."""
    if benchmark is None:
        raise RuntimeError("the harness runs only after the runtime bound it to a benchmark")
    text = benchmark.instruction(task, prepared)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"benchmark {benchmark.name!r} gave an empty instruction for task {task.task_id!r}")
    return text


def time_limit(task: TaskSpec) -> float | None:
    """The task's own time limit for the agent (``task.data["agent_timeout_sec"]``), or None."""
    value = task.data.get(TIME_LIMIT_KEY)
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"task {task.task_id!r}: data[{TIME_LIMIT_KEY!r}] is not a number: {value!r}") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"task {task.task_id!r}: data[{TIME_LIMIT_KEY!r}] must be positive, got {value!r}")
    return seconds


def clip(text: str, limit: int, hint: str = "") -> str:
    """``text`` cut to about ``limit`` characters: its head and its tail, with a note of what was left out."""
    if len(text) <= limit:
        return text
    head = int(limit * 0.4)
    tail = max(limit - head, 0)
    omitted = len(text) - head - tail
    note = f"\n[... {omitted} characters omitted{'; ' + hint if hint else ''} ...]\n"
    return text[:head] + note + (text[-tail:] if tail else "")


def tail(text: str, limit: int = 2000) -> str:
    """The last ``limit`` characters of ``text``."""
    return text if len(text) <= limit else "…" + text[-limit:]


def one_line(text: str, limit: int = 300) -> str:
    """The last non-empty lines of ``text`` joined into one line of at most ``limit`` characters (error
    messages are shown by their first line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " | ".join(lines)
    return joined if len(joined) <= limit else "…" + joined[-limit:]


def format_seconds(seconds: float) -> str:
    return f"{seconds:g} s"
