"""example_coding: a small ordinary (harness-driven) agentcompass benchmark with reference solutions.

Each task asks the agent to write ``solution.py`` implementing one function; hidden tests score it in a
fresh environment. The ``oracle`` harness applies the reference solutions (score 1.0), ``nop`` submits
nothing (0.0).
"""

__all__ = ["ExampleCodingBenchmark"]


def __getattr__(name: str) -> object:  # keep `import agentcompass_example_coding` free of work
    if name == "ExampleCodingBenchmark":
        from agentcompass_example_coding.benchmark import ExampleCodingBenchmark

        return ExampleCodingBenchmark
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
