"""Reading run directories, for tools and plugins (the report, the exporters): the public face of the engine's
results code, which plugins never import.

* :class:`RunReader`: a run directory read incrementally, every record validated (a damaged line is skipped
  with a warning): results, attempts, trajectories by byte range, ``logs(offset)``; :class:`Key` names one
  (task, trial);
* the file names of the run-directory contract (:data:`RESULTS`, :data:`SUMMARY`, ...; the README's
  run-directory table), :func:`read_json_file` and :func:`result_problem`;
* comparing runs (:func:`load_run`, :func:`compare`: the numbers ``agentcompass results compare`` prints);
* a suite directory's leaderboard (:func:`leaderboard`, :func:`is_suite_directory`: what ``agentcompass suite
  show --json`` prints);
* a validate directory's findings (:func:`read_validity` into a :class:`ValidityReport` of
  :class:`TaskValidity`, :func:`is_validate_directory`: what ``agentcompass validate --json`` prints).

::

    from agentcompass.runtime.run_reader import RunReader

    run = RunReader.open(Path("runs/RUN_ID"))   # run.json checked; what the files hold so far read
    run.results[("task_1", 1)]                   # the final record of (task, trial), as its JSON object
    run.refresh()                                # a live run: read only what was appended since

This module holds no code: it hands on, under the import path plugins use, what the engine's
``agentcompass.results``, ``agentcompass.suites`` and ``agentcompass.validation`` implement.
"""

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
from agentcompass.validation import TaskValidity, ValidityReport, is_validate_directory, read_validity

__all__ = ["ARTIFACTS", "ATTEMPTS", "LOGS", "RESULTS", "RUN_JSON", "SUMMARY", "TRAJECTORIES", "Comparison", "Key",
           "LoadedRun", "MetricComparison", "RunReader", "RunSide", "TaskValidity", "ValidityReport", "compare",
           "is_suite_directory", "is_validate_directory", "leaderboard", "load_run", "read_json_file",
           "read_validity", "result_problem"]
