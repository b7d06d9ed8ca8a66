"""agentcompass entry point of the taubench benchmark."""

from __future__ import annotations

from typing import Any

from agentcompass import hookimpl


def _factory(**options: Any) -> Any:
    from agentcompass_taubench.benchmark import TauBenchBenchmark

    return TauBenchBenchmark(**options)


@hookimpl
def register_benchmarks(register: Any) -> None:
    register("taubench", _factory)
