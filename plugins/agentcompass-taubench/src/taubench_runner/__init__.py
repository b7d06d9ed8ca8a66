"""The tau2-bench runner placed in a task's environment: the mock, airline and retail domains, tau2's
orchestration protocol and its evaluator, written for the standard library (Python 3.11+).

Run it as ``python3 -m taubench_runner {run,oracle,evaluate} ...`` (see :mod:`taubench_runner.__main__`).
"""

__version__ = "0.1.0"
