"""The old import path of :mod:`agentcompass.results.comparison` (comparing runs: ``results compare``)."""

from agentcompass.results.comparison import (
    Comparison,
    LoadedRun,
    MetricComparison,
    RunSide,
    compare,
    load_run,
)

__all__ = ["Comparison", "LoadedRun", "MetricComparison", "RunSide", "compare", "load_run"]
