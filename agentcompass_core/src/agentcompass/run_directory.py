"""Deprecated: the old import path of :mod:`agentcompass.runtime.run_reader` (reading run directories). Importing it
warns; it goes in 0.2.0."""

import warnings

warnings.warn("agentcompass.run_directory is deprecated and goes in 0.2.0: import agentcompass.runtime.run_reader "
              "instead (the same names)", DeprecationWarning, stacklevel=2)

from agentcompass.runtime.run_reader import (  # noqa: E402
    ARTIFACTS,
    ATTEMPTS,
    LOGS,
    RESULTS,
    RUN_JSON,
    SUMMARY,
    TRAJECTORIES,
    Comparison,
    Key,
    LoadedRun,
    MetricComparison,
    RunReader,
    RunSide,
    compare,
    is_suite_directory,
    leaderboard,
    load_run,
    read_json_file,
    result_problem,
)

__all__ = ["ARTIFACTS", "ATTEMPTS", "LOGS", "RESULTS", "RUN_JSON", "SUMMARY", "TRAJECTORIES", "Comparison", "Key",
           "LoadedRun", "MetricComparison", "RunReader", "RunSide", "compare", "is_suite_directory", "leaderboard",
           "load_run", "read_json_file", "result_problem"]
