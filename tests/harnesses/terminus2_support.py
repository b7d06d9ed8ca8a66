"""What the ``terminus-2`` tests share: a Harbor task whose image has tmux (``FROM python:3.11-slim`` with
Debian's tmux, built once and reused by later runs), and scripted models answering in Terminus 2's JSON format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentcompass.testing import text

from tests.harbor.taskdirs import REWARD_BY_EXIT, write_task
from tests.harnesses.support import assistant_turns

#: A task image with tmux; Debian's mirror is reachable from ``docker build`` (the task's container is not).
TMUX_DOCKERFILE = ("FROM python:3.11-slim\n"
                   "RUN apt-get update && apt-get install -y --no-install-recommends tmux "
                   "&& rm -rf /var/lib/apt/lists/*\n"
                   "WORKDIR /app\n")

INSTRUCTION = "Create the file /app/hello.txt holding the single line `hello`."


def tmux_task(root: Path) -> Path:
    """``root/hello-tmux``: the reward is 1 when /app/hello.txt holds ``hello``; returns ``root``."""
    write_task(root, "hello-tmux", instruction=INSTRUCTION, dockerfile=TMUX_DOCKERFILE,
               test='[ "$(cat /app/hello.txt 2>/dev/null)" = "hello" ]\n' + REWARD_BY_EXIT)
    return root


def reply(*keystrokes: str, complete: bool = False, duration: float = 0.3, **extra: Any) -> str:
    """A Terminus 2 answer in its JSON format."""
    body = {"analysis": "Looking at the terminal.", "plan": "Type the next commands.",
            "commands": [{"keystrokes": k, "duration": duration} for k in keystrokes], **extra}
    if complete:
        body["task_complete"] = True
    return json.dumps(body, indent=2)


#: The script that solves the task: one malformed answer (Harbor's parse-error prompt), a command, a check,
#: then "task complete" twice (the first is asked to be confirmed).
SOLVING = [
    "I will now create the file.",  # no JSON at all
    reply("echo hello > /app/hello.txt\n"),
    reply("cat /app/hello.txt\n"),
    reply(complete=True),
    reply(complete=True),
]

#: Says it is done without doing anything.
IDLE = [reply("ls\n"), reply(complete=True), reply(complete=True)]


def scripted(answers: list[str]) -> Any:
    """A responder answering turn N (counted by the assistant messages it was sent) with ``answers[N]``."""

    def responder(request: dict[str, Any]) -> dict[str, Any]:
        turn = assistant_turns(request)
        return text(answers[turn] if turn < len(answers) else reply(complete=True))

    return responder
