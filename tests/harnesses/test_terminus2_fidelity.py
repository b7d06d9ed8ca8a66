"""``terminus-2`` asks the model what Harbor's Terminus 2 asks it: the same scripted model answers both, and the
requests — every message of every call — are compared turn by turn.

Harbor's own agent comes from an installed ``harbor`` (Python 3.12, in a virtual environment outside the
repository, as the ATIF comparison uses it): :mod:`tests.harnesses.harbor_terminus2_driver` drives its
``Terminus2`` class in a container of the same image (``harbor run`` itself needs docker compose), ours runs
through the whole lifecycle (``harbor`` benchmark, ``docker`` environment, the run's model client).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from agentcompass.testing import LoopbackOpenAI, text

from tests.export.test_atif_export import harbor_python  # noqa: F401  (the fixture)
from tests.harnesses.support import run_with
from tests.harnesses.terminus2_support import IDLE, SOLVING, reply, scripted, tmux_task
from tests.helpers.docker_engine import require_engine

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DRIVER = Path(__file__).with_name("harbor_terminus2_driver.py")


@pytest.fixture(autouse=True)
def engine() -> None:
    require_engine()


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmux_task(tmp_path_factory.mktemp("terminus2-fidelity") / "tasks")


def normalized(requests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The requests' messages, with the container's host name (in the shell prompt) made neutral, and the screen's
    bare prompt lines and runs of empty lines dropped: whether ``bash --login`` has drawn its first prompt when the
    first screen is captured is a race in Harbor's agent as in ours (on a loaded machine either may lose it)."""
    def clean(value: str) -> str:
        value = re.sub(r"root@[0-9a-zA-Z_.-]+:", "root@HOST:", value)
        value = re.sub(r"(?m)^root@HOST:[^\n]*?# *$", "", value)
        return re.sub(r"\n\s*\n", "\n", value)
    return [[{"role": m["role"], "content": clean(str(m["content"]))} for m in r["messages"]] for r in requests]


def harbor_requests(python: str, task: Path, responder: Any, tmp_path: Path,
                    options: dict[str, Any]) -> list[dict[str, Any]]:
    """What Harbor's Terminus 2 sent the scripted model, running on ``task`` in a fresh container of its image."""
    image = subprocess.run(["docker", "build", "-q", str(task / "environment")], capture_output=True, text=True,
                           timeout=600, check=True).stdout.strip()
    container = subprocess.run(["docker", "run", "-d", "--rm", "--network", "none", image, "sleep", "600"],
                               capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    try:
        subprocess.run(["docker", "exec", container, "mkdir", "-p", "/logs/agent"], check=True, timeout=60)
        with LoopbackOpenAI(responder, api_key=None) as server:
            env = {**os.environ, **server.env(), "OPENAI_API_KEY": "any-key", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
            done = subprocess.run([python, str(DRIVER), container, str(task / "instruction.md"), str(tmp_path),
                                   json.dumps(options)],
                                  capture_output=True, text=True, timeout=300, env=env)
            assert done.returncode == 0, done.stderr[-3000:]
            return list(server.requests)
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, timeout=60)


#: The provider's refusal of a prompt too long for the model's context (OpenAI's words).
TOO_LONG = (400, {"error": {"message": "This model's maximum context length is 2000 tokens. However, your messages "
                                       "resulted in 2300 tokens. Please reduce the length of the messages.",
                            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})


def cut_off(content: str) -> tuple[int, dict[str, Any]]:
    """A completion stopped at the output limit (``finish_reason: length``)."""
    return 200, {"id": "chatcmpl-cut", "object": "chat.completion", "created": 0, "model": "scripted",
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                              "finish_reason": "length"}],
                 "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}


def summarizing(answers: list[str], refuse: int | None = None, cut: int | None = None) -> Any:
    """A responder for a run that summarises: the three summarising calls are answered by what they ask, the
    agent's own turns with ``answers`` in order; with ``refuse=N``, the agent's N-th call (from 0) is refused
    once as too long for the context; with ``cut=N``, its answer is cut at the output limit."""
    main = iter(answers)
    lock = threading.Lock()
    calls = [0]

    def responder(request: dict[str, Any]) -> Any:
        prompt = str(request["messages"][-1]["content"])
        if prompt.startswith("You are about to hand off"):
            return text("SUMMARY: the file is written, it remains to check it.")
        if prompt.startswith("You are picking up work"):
            return text("1. Is the file there?\n2. Does it hold hello?")
        if prompt.startswith("The next agent has a few questions"):
            return text("1. Yes.\n2. Yes.")
        with lock:
            calls[0] += 1
            if refuse is not None and calls[0] == refuse + 1:
                return TOO_LONG
            if cut is not None and calls[0] == cut + 1:
                return cut_off('{"analysis": "I will write the file", "plan": "echo hel')
            return text(next(main, reply(complete=True)))

    return responder


SUMMARIZED = [reply("echo hello > /app/hello.txt\n"), reply(complete=True), reply(complete=True)]

#: script -> (responder, our harness options, Harbor's Terminus2 options, requests expected)
CASES: dict[str, tuple[Any, dict[str, str], dict[str, Any], int]] = {
    "solving": (lambda: scripted(SOLVING), {}, {}, len(SOLVING)),
    "idle": (lambda: scripted(IDLE), {}, {}, len(IDLE)),
    # a context of 2,000 tokens with 1,900 to be kept free: every turn after the first is summarised first
    "summarized": (lambda: summarizing(SUMMARIZED),
                   {"context_limit": "2000", "proactive_summarization_threshold": "1900"},
                   {"model_info": {"max_input_tokens": 2000, "max_output_tokens": 1000, "input_cost_per_token": 0,
                                   "output_cost_per_token": 0},
                    "proactive_summarization_threshold": 1900}, 3 + 2 * 3),
    # the provider refuses the agent's second call as too long: summarised, then the handoff prompt
    "refused": (lambda: summarizing(SUMMARIZED, refuse=1), {}, {}, 1 + 1 + 3 + 2),
    # the agent's first answer stops at the output limit: Harbor's "ERROR!! NONE of the actions ..." prompt
    "cut_off": (lambda: summarizing(SUMMARIZED, cut=0), {}, {}, 1 + 3),
}


@pytest.mark.parametrize("case", list(CASES))
def test_terminus2_sends_what_harbors_terminus2_sends(case: str, tasks: Path, tmp_path: Path,
                                                      harbor_python: str) -> None:  # noqa: F811
    import asyncio

    responder, harness_args, harbor_options, expected = CASES[case]
    run, ours = asyncio.run(run_with(responder(), "harbor", "terminus-2", environment="docker",
                                     benchmark_args={"path": str(tasks)}, harness_args=harness_args,
                                     run_dir=tmp_path / "run"))
    assert run.results[0].artifacts["terminus-2"]["stop_reason"] == "task_complete", run.results[0].error
    assert run.results[0].metrics == {"reward": 0.0 if case == "idle" else 1.0}
    theirs = harbor_requests(harbor_python, tasks / "hello-tmux", responder(), tmp_path / "harbor", harbor_options)
    ours_messages, their_messages = normalized(list(ours.requests)), normalized(theirs)
    assert len(ours_messages) == len(their_messages) == expected
    for turn, (mine, harbors) in enumerate(zip(ours_messages, their_messages, strict=True)):
        assert mine == harbors, f"request {turn} differs"
