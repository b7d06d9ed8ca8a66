"""Harbor task directories for the tests, written the way task authors write them (instruction.md, task.toml,
environment/Dockerfile, tests/test.sh, solution/solve.sh).

:func:`suite` writes the standard set into a directory; :data:`EXPECTED` is what each task's own verifier gives
under ``oracle`` and ``nop`` — the statuses and rewards the benchmark must report. Every Dockerfile is
``FROM python:3.11-slim`` (the only image here). Paths are the ones Harbor tasks use (``/app``,
``/logs/verifier``); the ``local`` environment maps them into its working directory.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\n"

REWARD_BY_EXIT = """\
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def write_task(root: Path, name: str, *, instruction: str, test: str, solve: str | None = None,
               toml: str = "", dockerfile: str | None = DOCKERFILE, files: dict[str, str] | None = None) -> Path:
    """One task directory ``root/name``; ``toml`` is added to a minimal ``task.toml``."""
    task = root / name
    (task / "tests").mkdir(parents=True, exist_ok=True)
    (task / "instruction.md").write_text(textwrap.dedent(instruction).strip() + "\n")
    (task / "task.toml").write_text('version = "1.0"\n\n' + textwrap.dedent(toml).strip() + "\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\n" + textwrap.dedent(test).lstrip())
    if solve is not None:
        (task / "solution").mkdir(exist_ok=True)
        (task / "solution" / "solve.sh").write_text("#!/bin/bash\n" + textwrap.dedent(solve).lstrip())
    if dockerfile is not None:
        (task / "environment").mkdir(exist_ok=True)
        (task / "environment" / "Dockerfile").write_text(dockerfile)
    for relative, text in (files or {}).items():
        path = task / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return task


@dataclass(frozen=True)
class Expect:
    status: str
    reward: float | None = None
    #: A piece of the error message (for error statuses).
    error: str | None = None


#: task -> (under oracle, under nop)
EXPECTED: dict[str, tuple[Expect, Expect]] = {
    "hello": (Expect("COMPLETED", 1.0), Expect("COMPLETED", 0.0)),
    "wrong-solution": (Expect("COMPLETED", 0.0), Expect("COMPLETED", 0.0)),
    "multi-reward": (Expect("COMPLETED", 1.0), Expect("COMPLETED", 0.0)),
    "no-reward": (Expect("EVAL_ERROR", error="no reward file"), Expect("EVAL_ERROR", error="no reward file")),
    "verifier-crash": (Expect("EVAL_ERROR", error="boom in the verifier"),
                       Expect("EVAL_ERROR", error="boom in the verifier")),
    "verifier-timeout": (Expect("EVAL_ERROR", error="timed out"), Expect("EVAL_ERROR", error="timed out")),
    "bad-reward": (Expect("EVAL_ERROR", error="not a finite number"),
                   Expect("EVAL_ERROR", error="not a finite number")),
    "slow-solution": (Expect("RUN_ERROR", error="timed out"), Expect("COMPLETED", 0.0)),
    "image-data": (Expect("COMPLETED", 1.0), Expect("COMPLETED", 0.0)),
}

#: Tasks whose verdict needs their image (environment/Dockerfile puts data into it): docker only.
DOCKER_ONLY = frozenset({"image-data"})


def suite(root: Path, *, docker: bool = False) -> Path:
    """The standard tasks (``image-data`` only with ``docker``) under ``root``; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    write_task(
        root, "hello",
        instruction="Create the file /app/hello.txt holding the single line `hello`.",
        toml="""
            [metadata]
            difficulty = "easy"
            category = "files"
            [verifier]
            timeout_sec = 60.0
            [agent]
            timeout_sec = 120.0
            [environment]
            network_mode = "no-network"
        """,
        test='echo "checking /app/hello.txt"\n[ "$(cat /app/hello.txt 2>/dev/null)" = "hello" ]\n' + REWARD_BY_EXIT,
        solve="echo hello > /app/hello.txt\n",
    )
    write_task(
        root, "wrong-solution",
        instruction="Write the number 42 into /app/answer.txt.",
        toml='[metadata]\ndifficulty = "medium"\n[environment]\nallow_internet = false\n',
        test='[ "$(cat /app/answer.txt 2>/dev/null)" = "42" ]\n' + REWARD_BY_EXIT,
        solve="echo 41 > /app/answer.txt\n",
    )
    write_task(
        root, "multi-reward",
        instruction="Write the lines alpha, beta, gamma and delta (one per line) into /app/words.txt.",
        toml='[metadata]\ndifficulty = "medium"\n',
        test="""
            found=0
            for w in alpha beta gamma delta; do grep -qx "$w" /app/words.txt 2>/dev/null && found=$((found+1)); done
            python3 - "$found" <<'EOF'
            import json, sys
            found = int(sys.argv[1])
            json.dump({"reward": 1 if found == 4 else 0, "accuracy": found / 4, "checked": 4},
                      open("/logs/verifier/reward.json", "w"))
            EOF
        """,
        solve="printf 'alpha\\nbeta\\ngamma\\ndelta\\n' > /app/words.txt\n",
    )
    write_task(
        root, "no-reward",
        instruction="Do anything.",
        toml='[metadata]\ndifficulty = "hard"\n',
        test='echo "the tests ran but forgot to write a reward"\n',
        solve="true\n",
    )
    write_task(
        root, "verifier-crash",
        instruction="Do anything.",
        toml='[metadata]\ndifficulty = "hard"\n',
        test='echo "starting the checks"\necho "Traceback: boom in the verifier" >&2\nexit 3\n',
        solve="true\n",
    )
    write_task(
        root, "verifier-timeout",
        instruction="Do anything.",
        toml='[metadata]\ndifficulty = "hard"\n[verifier]\ntimeout_sec = 1.0\n',
        test='echo "checking slowly"\nsleep 60\necho 1 > /logs/verifier/reward.txt\n',
        solve="true\n",
    )
    write_task(
        root, "bad-reward",
        instruction="Do anything.",
        toml='[metadata]\ndifficulty = "hard"\n',
        test="echo NaN > /logs/verifier/reward.txt\n",
        solve="true\n",
    )
    write_task(
        root, "slow-solution",
        instruction="Create /app/done.txt.",
        toml='[metadata]\ndifficulty = "easy"\n[agent]\ntimeout_sec = 1.0\n',
        test="[ -f /app/done.txt ]\n" + REWARD_BY_EXIT,
        solve="sleep 60\ntouch /app/done.txt\n",
    )
    if docker:
        write_task(
            root, "image-data",
            instruction="Copy /opt/data/input.txt to /app/output.txt, in upper case.",
            toml='[metadata]\ndifficulty = "easy"\n',
            dockerfile="FROM python:3.11-slim\nRUN mkdir -p /opt/data && echo 'from the image' > /opt/data/input.txt\n"
                       "WORKDIR /app\n",
            test='[ "$(cat /app/output.txt 2>/dev/null)" = "FROM THE IMAGE" ]\n' + REWARD_BY_EXIT,
            solve="tr a-z A-Z < /opt/data/input.txt > /app/output.txt\n",
        )
    return root


def separate_task(root: Path) -> Path:
    """A task verified in a separate environment: only its declared output (``/app/out.txt``) reaches the
    verifier, which fails when the agent's other files (``/app/scratch.txt``) are there."""
    write_task(
        root, "separate",
        instruction="Write 42 into /app/out.txt.",
        toml="""
            artifacts = ["/app/out.txt"]
            [metadata]
            difficulty = "easy"
            [verifier]
            environment_mode = "separate"
        """,
        test='[ "$(cat /app/out.txt 2>/dev/null)" = "42" ] && [ ! -e /app/scratch.txt ]\n' + REWARD_BY_EXIT,
        solve="echo scratch > /app/scratch.txt\necho 42 > /app/out.txt\n",
    )
    return root
