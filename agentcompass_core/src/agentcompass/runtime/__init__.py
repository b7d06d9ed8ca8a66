"""The public API plugin authors import. Names here are a contract: they only ever grow.

Beside this package's names: :mod:`agentcompass.runtime.executor` (the executor seam),
:mod:`agentcompass.runtime.phases` (an attempt's phases and default timeouts),
:mod:`agentcompass.runtime.records` (typed run records), :mod:`agentcompass.runtime.models` (the model client
interface), :mod:`agentcompass.runtime.model_providers` (for model-provider plugins: settings, credentials),
:mod:`agentcompass.runtime.logs` (the run's logger), :mod:`agentcompass.runtime.names`,
:mod:`agentcompass.runtime.comparison` (comparing runs), :mod:`agentcompass.runtime.owned_dirs` (host
directories a run owns), :mod:`agentcompass.runtime.remote` (executors running attempts elsewhere: the data
that crosses, :mod:`agentcompass.runtime.remote_attempts`, and the worker), :mod:`agentcompass.runtime.options`
(parsing plugin options), :mod:`agentcompass.errors`, and the ``agentcompass.testing`` kit.

This package is the contract at the bottom: it imports nothing from the engine (the runner, the lifecycle, the
gateway, the results code) — only itself and the dependency-free :mod:`agentcompass.errors`,
:mod:`agentcompass.redaction` and :mod:`agentcompass.procfs`. The one exception is a module kept so that an
import path works, whose body only hands names on (:mod:`agentcompass.runtime.remote`,
:mod:`agentcompass.runtime.providers`, :mod:`agentcompass.runtime.comparison`).
"""

from agentcompass.runtime.benchmark import BaseBenchmark, EvaluationEnvironmentMode, HarnessFreeBenchmark
from agentcompass.runtime.environment import (
    EnvironmentDemand,
    EnvironmentProvider,
    EnvironmentSession,
    PruneReport,
)
from agentcompass.runtime.harness import AttemptLimits, BaseHarness
from agentcompass.runtime.metrics import MetricContract, make_metric_contract
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError, Usage
from agentcompass.runtime.records import RunSummary, TaskEvent
from agentcompass.runtime.types import (
    EnvironmentSpec,
    ExecResult,
    ExecutionPlan,
    ModelEndpoint,
    PreparedTask,
    RoleModelSettings,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)

__all__ = [
    "AttemptLimits",
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
    "PruneReport",
    "RoleModelSettings",
    "RunRequest",
    "RunResult",
    "RunSummary",
    "TaskEvent",
    "TaskSpec",
    "TaskStatus",
    "Usage",
    "make_metric_contract",
]
