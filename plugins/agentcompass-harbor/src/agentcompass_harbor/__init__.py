"""The ``harbor`` benchmark: Harbor / Terminal-Bench 2 task directories for agentcompass
(:class:`~agentcompass_harbor.benchmark.HarborBenchmark`)."""

__all__ = ["HarborBenchmark"]


def __getattr__(name: str) -> object:  # keep `import agentcompass_harbor` free of work
    if name == "HarborBenchmark":
        from agentcompass_harbor.benchmark import HarborBenchmark

        return HarborBenchmark
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
