"""A kit for testing agentcompass plugins: runs through the real lifecycle, real environment sessions, fake
models, and one-line conformance checks.

::

    from agentcompass.testing import check_benchmark, run_benchmark

    async def test_squares():
        run = await run_benchmark(SquaresBenchmark)            # prepare → run → collect → evaluate, for real
        assert run.exit_code == 0 and run.metric("score") == {"sq0": 1.0, "sq1": 0.0, "sq2": 1.0, "sq3": 0.0}
        await check_benchmark(SquaresBenchmark())              # idempotent prepare, errors kept, collect never scores

Installed with ``agentcompass-core`` as the pytest plugin ``agentcompass`` (fixtures ``agentcompass_host``,
``agentcompass_register``, ``agentcompass_run``, ``agentcompass_session``, ``agentcompass_openai``); see
:mod:`agentcompass.testing.pytest_plugin`. Importing this package never imports pytest.
"""

from agentcompass.builtin.mock_model import MockModel, count_tokens
from agentcompass.testing.checks import (
    DELIBERATE_ERROR,
    check_benchmark,
    check_collect_does_not_score,
    check_evaluate_keeps_error,
    check_prepare_idempotent,
    default_request,
    first_task,
)
from agentcompass.testing.environment_checks import (
    check_environment_provider,
    check_exec_in_workdir,
    check_exec_timeout_kills_tree,
    check_paths_confined,
)
from agentcompass.testing.host import host_workdir
from agentcompass.testing.runs import (
    FunctionHarness,
    KitRun,
    RegistrationError,
    read_jsonl,
    registered,
    result_from_record,
    run_benchmark,
)
from agentcompass.testing.scripted_models import (
    DEFAULT_API_KEY,
    LoopbackOpenAI,
    Responder,
    ScriptedModel,
    mock_responder,
    scripted,
    text,
    tool_call,
)
from agentcompass.testing.sessions import (
    EnvironmentSessions,
    ExecCall,
    RecordingProvider,
    RecordingSession,
    environment_sessions,
    local_session,
    make_provider,
    open_session,
)

__all__ = [
    "DEFAULT_API_KEY",
    "DELIBERATE_ERROR",
    "EnvironmentSessions",
    "ExecCall",
    "FunctionHarness",
    "KitRun",
    "LoopbackOpenAI",
    "MockModel",
    "RecordingProvider",
    "RecordingSession",
    "RegistrationError",
    "Responder",
    "ScriptedModel",
    "check_benchmark",
    "check_collect_does_not_score",
    "check_environment_provider",
    "check_evaluate_keeps_error",
    "check_exec_in_workdir",
    "check_exec_timeout_kills_tree",
    "check_paths_confined",
    "check_prepare_idempotent",
    "count_tokens",
    "default_request",
    "environment_sessions",
    "first_task",
    "host_workdir",
    "local_session",
    "make_provider",
    "mock_responder",
    "open_session",
    "read_jsonl",
    "registered",
    "result_from_record",
    "run_benchmark",
    "scripted",
    "text",
    "tool_call",
]
