"""Entry point of the harbor plugin: registers the ``harbor`` benchmark. Importing it is cheap (the benchmark
module needs only the standard library and ``agentcompass.runtime``)."""

from __future__ import annotations

from typing import Any

from agentcompass import hookimpl


def _harbor(**options: Any) -> Any:
    from agentcompass_harbor.benchmark import HarborBenchmark

    return HarborBenchmark(**options)


@hookimpl
def register_benchmarks(register: Any) -> None:
    register("harbor", _harbor)
