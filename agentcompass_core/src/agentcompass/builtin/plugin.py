"""The core's own plugin, loaded through the ``agentcompass`` entry point ``builtin`` like any other.

Imports stay cheap: each factory imports its implementation when called.
"""

from __future__ import annotations

from typing import Any

from agentcompass import hookimpl
from agentcompass.runtime.metrics import make_metric_contract


def _harness(name: str) -> Any:
    def factory(**options: Any) -> Any:
        from agentcompass.builtin import harnesses

        cls = {"none": harnesses.NoHarness, "nop": harnesses.NopHarness, "oracle": harnesses.OracleHarness}[name]
        return cls(**options)

    return factory


def _local_environment(**options: Any) -> Any:
    from agentcompass.builtin.local import LocalProvider

    return LocalProvider(**options)


def _mock_model(name: str = "", **options: Any) -> Any:
    from agentcompass.builtin.mock_model import MockModel

    return MockModel(name, **options)


def _local_executor(**options: Any) -> Any:
    from agentcompass.runtime.executor import LocalExecutor

    return LocalExecutor(**options)


@hookimpl
def register_harnesses(register):
    for name in ("none", "nop", "oracle"):
        register(name, _harness(name))


@hookimpl
def register_environments(register):
    register("local", _local_environment)


@hookimpl
def register_models(register):
    register("mock", _mock_model)


@hookimpl
def register_executors(register):
    register("local", _local_executor)


@hookimpl
def register_metric_contracts(register):
    register("score", lambda: make_metric_contract(primary="score", scalar=("score",), labels={"score": "Score"}))
    register(
        "pass_rate",
        lambda: make_metric_contract(primary="passed", scalar=("passed",), labels={"passed": "Pass rate"},
                                     binary=True),
    )
    register(
        "reward",
        lambda: make_metric_contract(primary="reward", scalar=("reward",), labels={"reward": "Reward"},
                                     binary=True),
    )


def _scanner(name: str) -> Any:
    def factory(arg: str | None = None) -> Any:
        from agentcompass.scanning.builtin import BUILTIN

        return BUILTIN[name](arg)

    return factory


@hookimpl
def register_scanners(register):
    from agentcompass.scanning.names import BUILTIN_SCANNERS

    for name in BUILTIN_SCANNERS:
        register(name, _scanner(name))
