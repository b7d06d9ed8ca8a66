"""The public API plugin authors import. Names here are a contract: they only ever grow.

The public API is exactly the modules of :data:`PUBLIC_MODULES`; everything else under ``agentcompass`` is the
engine, which a plugin never imports (a test walks every bundled plugin's imports and fails on one that does).
Beside this package's names:

* the plugin's side of the runtime: :mod:`agentcompass.runtime.types` (value types),
  :mod:`agentcompass.runtime.benchmark`, :mod:`agentcompass.runtime.harness`,
  :mod:`agentcompass.runtime.environment` (base classes, the provider interface),
  :mod:`agentcompass.runtime.metrics` (metric contracts), :mod:`agentcompass.runtime.statistics` (their
  estimators), :mod:`agentcompass.runtime.options` (parsing plugin options), :mod:`agentcompass.runtime.logs`
  (the run's logger), :mod:`agentcompass.runtime.names`, :mod:`agentcompass.runtime.seeds`,
  :mod:`agentcompass.runtime.owned_dirs` (host directories a run owns), :mod:`agentcompass.runtime.known_secrets`
  (what a run masks), :mod:`agentcompass.runtime.chat_client` (an OpenAI client for code inside environments),
  :mod:`agentcompass.runtime.rate_limits` (a provider's concurrency adapted to its rate limits),
  :mod:`agentcompass.runtime.shortening` (an error cut to one line at word boundaries),
  :mod:`agentcompass.runtime.liveness` (an environment's signs of life, for the stall watchdog) and
  :mod:`agentcompass.runtime.wording` (counts in words: "1 call");
* executors: :mod:`agentcompass.runtime.executor` (the executor seam), :mod:`agentcompass.runtime.attempt_spec`,
  :mod:`agentcompass.runtime.phases` (an attempt's phases and default timeouts),
  :mod:`agentcompass.runtime.remote` (running attempts elsewhere: the worker, and the data that crosses,
  :mod:`agentcompass.runtime.remote_attempts`);
* model providers: :mod:`agentcompass.runtime.models` (the model client interface),
  :mod:`agentcompass.runtime.model_stream` (streamed answers, native requests),
  :mod:`agentcompass.runtime.model_providers` (settings, credentials), :mod:`agentcompass.runtime.codecs` (the
  vendor protocols' codecs);
* observers and tools: :mod:`agentcompass.runtime.records` (typed run records),
  :mod:`agentcompass.runtime.scanning` (transcript scanners: the ``Scanner`` contract, ``Transcript``, ``Finding``),
  :mod:`agentcompass.runtime.run_reader` (reading run directories, comparing runs, a suite's leaderboard),
  :mod:`agentcompass.runtime.run_control` (steering a live run, as ``agentcompass ctl`` does);
* :mod:`agentcompass.errors` (the domain errors), :mod:`agentcompass.hookspecs` (the hooks), and the top-level
  package's ``hookimpl`` and ``__version__``.

:data:`TESTING_MODULES` is the ``agentcompass.testing`` kit: public for a plugin's *tests*, never imported by a
plugin's own code nor by the engine.

This package is the contract at the bottom: it imports nothing from the engine (the runner, the lifecycle, the
gateway, the results code) — only itself and the dependency-free :mod:`agentcompass.errors`,
:mod:`agentcompass.redaction` and :mod:`agentcompass.procfs`. The exceptions hold no code and only hand on,
under a public name, an engine facility plugins need: :mod:`agentcompass.runtime.remote` (the worker),
:mod:`agentcompass.runtime.codecs` (the gateway's codecs), :mod:`agentcompass.runtime.run_reader` (the
results code), :mod:`agentcompass.runtime.run_control` (the control client); and the deprecated
``agentcompass.runtime.comparison`` (use ``run_reader``; it goes in 0.2.0).
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

#: Every module a plugin's code may import (of the top-level package, only ``hookimpl`` and ``__version__``).
PUBLIC_MODULES: frozenset[str] = frozenset({
    "agentcompass",
    "agentcompass.errors",
    "agentcompass.hookspecs",
    "agentcompass.runtime",
    *(f"agentcompass.runtime.{name}" for name in (
        "attempt_spec", "benchmark", "chat_client", "codecs", "environment", "executor", "harness", "known_secrets",
        "liveness", "logs", "metrics", "model_providers", "model_stream", "models", "names", "options", "owned_dirs",
        "phases", "rate_limits", "records", "remote", "remote_attempts", "run_control", "run_reader", "scanning",
        "seeds", "shortening", "statistics", "types", "wording")),
})

#: The test kit: public for a plugin's tests, never imported by a plugin's own code nor by the engine.
TESTING_MODULES: frozenset[str] = frozenset({
    "agentcompass.testing",
    *(f"agentcompass.testing.{name}" for name in (
        "checks", "environment_checks", "host", "pytest_plugin", "runs", "scripted_models", "sessions", "upstream")),
})

__all__ = [
    "PUBLIC_MODULES",
    "TESTING_MODULES",
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
