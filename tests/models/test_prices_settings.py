"""Price table, generation settings, budgets and plugin start-up cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.models.budget import LimitReached, RunBudget, RunStopped
from agentcompass.models.metering import TaskMeter
from agentcompass.models.prices import Price, PriceTable
from agentcompass.request_checks import check_request, raise_problems
from agentcompass.runtime import RunRequest, RunResult, TaskStatus
from agentcompass.runtime.model_providers import parse_value


def test_builtin_prices_and_prefix_lookup() -> None:
    table = PriceTable()
    assert table.lookup("openai/gpt-4o-mini") == Price(0.15, 0.60)
    assert table.lookup("openai/gpt-4o-mini-2024-07-18") == Price(0.15, 0.60)  # longest prefix wins
    assert table.lookup("openai/gpt-4o-2024-08-06") == Price(2.50, 10.00)
    assert table.lookup("openai-compatible/Qwen3-8B") is None
    assert table.lookup("openai-compatible/gpt-4o") is None  # another provider's price is not borrowed
    assert Price(2.0, 8.0).cost(1_000_000, 500_000) == pytest.approx(6.0)


def test_user_price_file_extends_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"openai/gpt-4o-mini": {"input": 1, "output": 2}, "Qwen3-8B": {"input": 0,
                                                                                            "output": 0.1}}))
    table = PriceTable.load(path)
    assert table.lookup("openai/gpt-4o-mini") == Price(1, 2)
    assert table.lookup("openai-compatible/Qwen3-8B") == Price(0, 0.1)
    monkeypatch.setenv("AGENTCOMPASS_PRICES", str(path))
    assert PriceTable.load().lookup("openai-compatible/Qwen3-8B") == Price(0, 0.1)
    path.write_text(json.dumps({"m": {"input": -1, "output": 0}}))
    with pytest.raises(UsageError, match=">= 0"):
        PriceTable.load(path)
    path.write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        PriceTable.load(path)


def test_parse_value() -> None:
    assert parse_value("0.2") == 0.2 and parse_value("7") == 7 and parse_value("true") is True
    assert parse_value('["a", "b"]') == ["a", "b"] and parse_value("hello") == "hello"


@pytest.mark.parametrize(("field", "value", "message"), [
    ("max_retries", -1, "--max-retries"), ("max_connections", 0, "--max-connections"),
    ("request_timeout", 0.0, "--request-timeout"), ("max_tokens_per_task", 0, "--max-tokens-per-task"),
    ("max_cost", 0.0, "--max-cost"),
])
def test_settings_validation(field: str, value: object, message: str) -> None:
    req = RunRequest(benchmark="b", harness="none", model="mock").with_options(**{field: value})
    with pytest.raises(UsageError, match=message):
        raise_problems(check_request(req))


def test_budget_and_meter() -> None:
    budget = RunBudget(max_cost=1.0)
    meter = TaskMeter("t", 1, budget=budget, max_tokens=10)
    meter.check("agent")
    meter.tokens_used = 10
    with pytest.raises(LimitReached, match="max_tokens_per_task=10"):
        meter.check("agent")
    meter.check("judge")  # the judge is exempt
    budget.add_cost(0.6)
    assert budget.stop_reason is None
    budget.add_cost(0.5)
    assert budget.stop_reason and budget.stop_reason.startswith("limit reached: max_cost=1 USD")
    with pytest.raises(LimitReached):
        meter.check("judge")
    other = RunBudget()
    other.stop("authentication failed")
    with pytest.raises(RunStopped, match="run stopped: authentication failed") as info:
        other.check()
    assert info.value.fatal


def test_settle() -> None:
    meter = TaskMeter("t", 1)
    done = RunResult(task_id="t", metrics={"score": 1.0})
    assert meter.settle(done) is done
    meter.limit_reached = "limit reached: max_tokens_per_task=5 (used 9)"
    settled = meter.settle(done)
    assert settled.status is TaskStatus.LIMIT_REACHED and settled.metrics == {} and settled.error_phase == "run"
    meter = TaskMeter("t", 1, fatal_error="authentication failed (HTTP 401)")
    failed = RunResult(task_id="t", status=TaskStatus.RUN_ERROR, error="runner exited 1: HTTP Error 401")
    assert meter.settle(failed).error == "model call failed: authentication failed (HTTP 401)"


def test_plugin_import_is_cheap() -> None:
    code = ("import sys, agentcompass_models.plugin; "
            "print(sorted(m for m in ('aiohttp', 'agentcompass_models.http', 'agentcompass_models.openai') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
