"""Turning domain errors into one-line CLI errors — the only place that happens."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import click

from agentcompass.errors import (
    AgentCompassError,
    PluginError,
    ResultsError,
    RunInterrupted,
    SetupError,
    UsageError,
)
from agentcompass.exit_codes import ExitCode

DEBUG_ENV = "AGENTCOMPASS_DEBUG"


class CLIError(click.ClickException):
    """One line on stderr, no traceback, a chosen exit status."""

    def __init__(self, message: str, exit_code: int = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.exit_code = int(exit_code)  # type: ignore[misc]  # click reads it per instance

    def show(self, file=None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


def exit_code_of(exc: AgentCompassError) -> ExitCode:
    """Bad input is a usage error; a machine or plugin that cannot run is a setup error."""
    if isinstance(exc, UsageError | ResultsError):
        return ExitCode.USAGE
    if isinstance(exc, RunInterrupted):
        return ExitCode.INTERRUPTED
    if isinstance(exc, SetupError | PluginError):
        return ExitCode.SETUP
    return ExitCode.SETUP


@contextlib.contextmanager
def cli_errors() -> Iterator[None]:
    try:
        yield
    except click.ClickException:
        raise  # already a CLI error
    except AgentCompassError as exc:
        raise CLIError(str(exc), exit_code=exit_code_of(exc)) from None
    except Exception as exc:
        # A bug (ours or a plugin's) still gets one line; the traceback is there for whoever asks for it.
        if os.environ.get(DEBUG_ENV):
            raise
        raise CLIError(
            f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 to see the traceback)",
            exit_code=ExitCode.SETUP,
        ) from None


#: An example of each KEY=VALUE option, for messages.
PAIR_EXAMPLES = {"--phase-timeout": "run=600", "--harness-arg": "max_turns=5", "--benchmark-arg": "split=test",
                 "--model-arg": "temperature=0", "--env-arg": "memory=4g", "--executor-arg": "address=auto"}


def parse_pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    """``("a=1", "b=x=y")`` → ``{"a": "1", "b": "x=y"}``; anything else is a usage error naming it. A key given
    again adds to it, comma-separated (``("upload=a:/x", "upload=b:/y")`` → ``{"upload": "a:/x,b:/y"}``)."""
    out: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        key = key.strip()
        if not sep or not key:
            example = PAIR_EXAMPLES.get(option, "key=value")
            raise CLIError(f"{option} takes KEY=VALUE, got {value!r} (e.g. {option} {example})")
        out[key] = f"{out[key]},{val}" if key in out else val
    return out
