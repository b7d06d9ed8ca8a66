"""Deprecated: the old import path of comparing runs, now in :mod:`agentcompass.runtime.run_reader` (``load_run``,
``compare``). Importing it warns; it goes in 0.2.0."""

import warnings

warnings.warn("agentcompass.runtime.comparison is deprecated and goes in 0.2.0: import "
              "agentcompass.runtime.run_reader instead (the same names)", DeprecationWarning, stacklevel=2)

from agentcompass.runtime.run_reader import (  # noqa: E402
    Comparison,
    LoadedRun,
    MetricComparison,
    RunSide,
    compare,
    load_run,
)

__all__ = ["Comparison", "LoadedRun", "MetricComparison", "RunSide", "compare", "load_run"]
