"""The public API plugin authors import. Names here are a contract: they only ever grow.

Beside this package's names: :mod:`agentcompass.runtime.executor` (the executor seam),
:mod:`agentcompass.runtime.records` (typed run records), :mod:`agentcompass.runtime.providers` (for model
providers), :mod:`agentcompass.runtime.logs` (the run's logger), :mod:`agentcompass.runtime.names`,
:mod:`agentcompass.runtime.comparison` (comparing runs), :mod:`agentcompass.runtime.owned_dirs` (host
directories a run owns), :mod:`agentcompass.runtime.remote` (executors running attempts elsewhere),
:mod:`agentcompass.runtime.options` (parsing plugin options),
:mod:`agentcompass.errors`, and the ``agentcompass.testing`` kit.
"""

from agentcompass.runtime.benchmark import BaseBenchmark, EvaluationEnvironmentMode, HarnessFreeBenchmark
from agentcompass.runtime.environment import EnvironmentDemand, EnvironmentProvider, EnvironmentSession
from agentcompass.runtime.harness import BaseHarness
from agentcompass.runtime.metrics import MetricContract, make_metric_contract
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError, Usage
from agentcompass.runtime.records import RunSummary, TaskEvent
from agentcompass.runtime.types import (
    EnvironmentSpec,
    ExecResult,
    ExecutionPlan,
    ModelEndpoint,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)

__all__ = [
    "BaseBenchmark",
    "BaseHarness",
    "ChatResponse",
    "EnvironmentDemand",
    "EnvironmentProvider",
    "EnvironmentSession",
    "EnvironmentSpec",
    "EvaluationEnvironmentMode",
    "ExecResult",
    "ExecutionPlan",
    "HarnessFreeBenchmark",
    "MetricContract",
    "ModelClient",
    "ModelEndpoint",
    "ModelError",
    "PreparedTask",
    "RunRequest",
    "RunResult",
    "RunSummary",
    "TaskEvent",
    "TaskSpec",
    "TaskStatus",
    "Usage",
    "make_metric_contract",
]
