"""Public API for reading run directories (the report and other tools import this, never ``agentcompass.results``):
the incremental :class:`RunReader`, the file names of the run-directory contract, comparing runs
(:func:`load_run`, :func:`compare`: the numbers ``agentcompass results compare`` prints), and a suite directory's
leaderboard (:func:`leaderboard`, :func:`is_suite_directory`: what ``agentcompass suite show --json`` prints)."""

from agentcompass.results.comparison import Comparison, LoadedRun, MetricComparison, RunSide, compare, load_run
from agentcompass.results.lines import (
    ARTIFACTS,
    ATTEMPTS,
    LOGS,
    RESULTS,
    RUN_JSON,
    SUMMARY,
    TRAJECTORIES,
    read_json_file,
    result_problem,
)
from agentcompass.results.reader import Key, RunReader
from agentcompass.suites.leaderboard import is_suite_directory, leaderboard

__all__ = ["ARTIFACTS", "ATTEMPTS", "LOGS", "RESULTS", "RUN_JSON", "SUMMARY", "TRAJECTORIES", "Comparison", "Key",
           "LoadedRun", "MetricComparison", "RunReader", "RunSide", "compare", "is_suite_directory", "leaderboard",
           "load_run", "read_json_file", "result_problem"]
