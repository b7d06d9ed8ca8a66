"""Entry point of the example_coding plugin. Importing it is cheap: the benchmark module only needs the
standard library and ``agentcompass.runtime``."""

from __future__ import annotations

from agentcompass import hookimpl
from agentcompass.hookspecs import Register

from agentcompass_example_coding.benchmark import ExampleCodingBenchmark


@hookimpl
def register_benchmarks(register: Register) -> None:
    register("example_coding", ExampleCodingBenchmark)
