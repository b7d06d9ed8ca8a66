"""agentcompass entry point of the example_interactive benchmark."""

from __future__ import annotations

from agentcompass import hookimpl

from example_interactive.benchmark import ExampleInteractiveBenchmark


@hookimpl
def register_benchmarks(register) -> None:
    register("example_interactive", ExampleInteractiveBenchmark)
