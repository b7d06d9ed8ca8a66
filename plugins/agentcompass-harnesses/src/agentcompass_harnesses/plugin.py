"""Entry point of the harnesses plugin: registers ``react``, ``command``, ``terminus-2`` and ``human``.
Importing it is cheap: each factory imports its harness when called."""

from __future__ import annotations

from typing import Any

from agentcompass import hookimpl

from agentcompass_harnesses.common import REACT_LIMITS


def _react(**options: Any) -> Any:
    from agentcompass_harnesses.react import ReactHarness

    return ReactHarness(**options)


_react.default_limits = REACT_LIMITS  # type: ignore[attr-defined]  # `plugins list` shows it


def _command(**options: Any) -> Any:
    from agentcompass_harnesses.command import CommandHarness

    return CommandHarness(**options)


def _terminus2(**options: Any) -> Any:
    from agentcompass_harnesses.terminus2.harness import Terminus2Harness

    return Terminus2Harness(**options)


def _human(**options: Any) -> Any:
    from agentcompass_harnesses.human import HumanHarness

    return HumanHarness(**options)


_human.interactive = True  # type: ignore[attr-defined]  # it takes the terminal: the console shows no live line


@hookimpl
def register_harnesses(register: Any) -> None:
    register("react", _react)
    register("command", _command)
    register("terminus-2", _terminus2)
    register("human", _human)
