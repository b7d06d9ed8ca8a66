"""The ``human`` harness driven through tmux, as a person would: the instruction comes first, the typed commands
solve the task in its environment, the recording (asciicast v2) replays what was typed, the task scores 1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harbor.taskdirs import suite
from tests.helpers.cli_processes import ROOT, read_jsonl
from tests.helpers.docker_engine import require_engine

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


class Tmux:
    """A private tmux server (its own socket) with one window running a command."""

    def __init__(self, name: str) -> None:
        self.server = f"agentcompass-test-{name}"

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.server, *args], capture_output=True, text=True, timeout=30,
                              check=True).stdout

    def start(self, command: list[str]) -> None:
        line = " ".join(_quote(part) for part in command)
        self.tmux("new-session", "-d", "-s", "main", "-x", "120", "-y", "40", "-c", str(ROOT),
                  f"{line}; echo EXITED $?; sleep 600")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "main")

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "main", "-l", text)
        self.tmux("send-keys", "-t", "main", "Enter")

    def wait_for(self, text: str, timeout: float = 240) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never showed; the screen:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.server, "kill-server"], capture_output=True, timeout=30)


def _quote(part: str) -> str:
    import shlex

    return shlex.quote(part)


@pytest.fixture
def tmux(request: pytest.FixtureRequest):
    session = Tmux(request.node.name.replace("[", "-").replace("]", ""))
    yield session
    session.kill()


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentcompass.cli.main", *args]


def replayed(cast: Path) -> tuple[dict, list[list], str, str]:
    """The header, the events, what was typed and what was shown."""
    header, *events = (json.loads(line) for line in cast.read_text().splitlines())
    typed = "".join(e[2] for e in events if e[1] == "i")
    shown = "".join(e[2] for e in events if e[1] == "o")
    return header, events, typed, shown


@pytest.mark.docker
def test_a_person_solves_a_harbor_task_in_docker_and_the_recording_replays_it(tmp_path, tmux):
    require_engine()
    tasks, run_dir = suite(tmp_path / "tasks", docker=True), tmp_path / "run"
    tmux.start(cli("run", "harbor", "human", "mock", "-b", f"path={tasks}", "-t", "hello", "--env", "docker",
                   "-o", str(run_dir)))
    screen = tmux.wait_for("/app# ")
    assert screen.index("Create the file /app/hello.txt") < screen.index("/app# ")  # the instruction first
    tmux.type("echo hello > /app/hello.txt")
    time.sleep(1.0)  # a pause the recording keeps
    tmux.type("exit")
    screen = tmux.wait_for("EXITED ")
    assert "EXITED 0" in screen, screen
    (result,) = read_jsonl(run_dir / "results.jsonl")
    assert (result["status"], result["metrics"]["reward"]) == ("COMPLETED", 1.0)
    assert result["artifacts"]["recording"] == "session.cast"
    header, events, typed, shown = replayed(run_dir / "artifacts" / "hello" / "attempt-1" / "session.cast")
    assert header["version"] == 2 and (header["width"], header["height"]) == (120, 40)
    assert typed == "echo hello > /app/hello.txt\rexit\r"
    assert "echo hello > /app/hello.txt" in shown and shown.index("your instruction") < shown.index("/app# ")
    times = [e[0] for e in events]
    assert times == sorted(times)
    echo, leave = (next(e[0] for e in events if e[1] == "i" and word in e[2]) for word in ("echo", "exit"))
    assert leave - echo >= 1.0  # timing kept


def test_a_person_solves_an_example_coding_task_in_the_local_environment(tmp_path, tmux):
    run_dir = tmp_path / "run"
    tmux.start(cli("run", "example_coding", "human", "mock", "-t", "is_palindrome", "--env", "local",
                   "-o", str(run_dir)))
    tmux.wait_for("# ", timeout=120)  # the shell's prompt (root's)
    tmux.type("printf 'def is_palindrome(s):\\n    t = [c.lower() for c in s if c.isalnum()]\\n"
              "    return t == t[::-1]\\n' > solution.py")
    tmux.type("exit")
    screen = tmux.wait_for("EXITED ")
    assert "EXITED 0" in screen, screen
    (result,) = read_jsonl(run_dir / "results.jsonl")
    assert (result["status"], result["metrics"]["score"]) == ("COMPLETED", 1.0)
    _, _, typed, _ = replayed(run_dir / "artifacts" / "is_palindrome" / "attempt-1" / "session.cast")
    assert typed.endswith("> solution.py\rexit\r")


def test_without_a_terminal_the_human_harness_says_so(tmp_path):
    done = subprocess.run(cli("run", "example_coding", "human", "mock", "-n", "1", "-o", str(tmp_path / "r")),
                          cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "the human harness needs a terminal on stdin" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists()


def test_two_tasks_take_the_terminal_one_at_a_time(tmp_path, tmux):
    run_dir = tmp_path / "run"
    tmux.start(cli("run", "example_coding", "human", "mock", "-t", "is_palindrome", "-t", "fizzbuzz", "-c", "2",
                   "--env", "local", "-o", str(run_dir)))
    screen = tmux.wait_for("# ", timeout=120)
    assert screen.count("your instruction") == 1  # the second session waits for the first
    tmux.type("exit")
    tmux.wait_for("[1/2]")
    wait = time.monotonic() + 60
    while tmux.screen().count("your instruction") < 2 and time.monotonic() < wait:
        time.sleep(0.2)
    assert tmux.screen().count("your instruction") == 2
    tmux.type("exit")
    assert "EXITED 0" in tmux.wait_for("EXITED ")
    results = read_jsonl(run_dir / "results.jsonl")
    assert sorted((r["task_id"], r["status"], r["metrics"]["score"]) for r in results) == [
        ("fizzbuzz", "COMPLETED", 0.0), ("is_palindrome", "COMPLETED", 0.0)]  # nothing solved: scored 0, no error
