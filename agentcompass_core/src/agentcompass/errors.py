"""Domain errors. The CLI turns them into one-line messages; nothing below the CLI prints."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AgentCompassError(Exception):
    """Base of every error agentcompass raises on purpose."""


class UsageError(AgentCompassError):
    """The user asked for something that cannot work (unknown name, bad argument, wrong combination).
    Raised before any task starts."""


class PluginError(AgentCompassError):
    """A plugin could not be loaded or registered."""


class InfrastructureError(AgentCompassError):
    """A failure of the machinery around a task (environment start, engine hiccup), worth a retry."""


class SetupError(AgentCompassError):
    """The run cannot be set up on this machine (an unwritable run directory, a missing engine). Raised before
    any task starts; nothing was run."""


class EnvironmentUnavailable(SetupError):
    """An environment kind cannot be used at all on this machine (e.g. no Docker engine). Stops the run
    before any task."""


class RunInterrupted(AgentCompassError):
    """The run was interrupted (Ctrl-C, SIGTERM) before it had recorded anything."""


class ResultsError(AgentCompassError):
    """A run directory is missing, damaged or belongs to another run."""


def describe(exc: BaseException) -> str:
    """One line naming an exception: ``"TypeError: message"`` (the first line of a multi-line message), or the
    type's name alone when the message is empty. The one formatter for errors shown to users."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def unknown_name(kind: str, name: str, known: Iterable[str], hint: str = "") -> UsageError:
    """An error for an unknown plugin name that lists what exists and suggests close matches."""
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    message = f"unknown {kind} {name!r}"
    message += f"; did you mean {', '.join(repr(c) for c in close)}?" if close else "."
    message += f" Available: {', '.join(names) if names else '(none)'}."
    if hint:
        message += f" {hint}"
    return UsageError(message)
