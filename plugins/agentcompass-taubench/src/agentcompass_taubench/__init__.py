"""agentcompass-taubench: tau2-bench's mock, airline and retail domains as the ``taubench`` benchmark.

Importing this package is cheap; the benchmark lives in :mod:`agentcompass_taubench.benchmark`, the runner
placed in each task's environment in the standard-library package :mod:`taubench_runner`.
"""

__version__ = "0.1.0"
