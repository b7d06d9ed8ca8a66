"""Grading a test log exactly as the official harness does: ``swebench.harness.grading.get_eval_report`` on
the instance's :class:`~swebench.types.TestSpec`, with the fractions from ``compute_fail_to_pass`` /
``compute_pass_to_pass``. Nothing here reads a test log itself."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from swebench.harness.constants import END_TEST_OUTPUT, FAIL_TO_PASS, PASS_TO_PASS, START_TEST_OUTPUT
from swebench.harness.grading import compute_fail_to_pass, compute_pass_to_pass, get_eval_report
from swebench.harness.run_evaluation import GIT_APPLY_CMDS

from agentcompass_swebench.dataset import Instance

__all__ = ["GIT_APPLY_CMDS", "Verdict", "grade_log", "timeout_note"]


def timeout_note(seconds: float) -> str:
    """What the official harness appends to a test log cut off by its timeout."""
    return f"\n\nTimeout error: {seconds:g} seconds exceeded."


@dataclass(frozen=True)
class Verdict:
    """The official report on one log, and what agentcompass makes of it.

    :param report: ``get_eval_report(...)[instance_id]`` — ``resolved``, ``patch_successfully_applied``,
        ``infra_failure`` (and ``infra_failure_reason``), ``tests_status`` (the per-test report).
    :param fail_to_pass: the FAIL_TO_PASS tests that passed, as a fraction (0 when no tests ran).
    :param pass_to_pass: the PASS_TO_PASS tests that still passed, as a fraction (0 when no tests ran).
    :param infra_failure: the reason the package gives when it classifies the log as an infrastructure
        failure of the environment tier (a retry may succeed), else ``None``.
    :param markers: whether the log holds both of the eval script's test-output markers.
    """

    instance_id: str
    report: dict[str, Any] = field(default_factory=dict)
    fail_to_pass: float = 0.0
    pass_to_pass: float = 0.0
    infra_failure: str | None = None
    markers: bool = True

    @property
    def resolved(self) -> bool:
        return bool(self.report.get("resolved"))

    @property
    def tests_ran(self) -> bool:
        return bool(self.report.get("patch_successfully_applied"))

    def metrics(self) -> dict[str, float]:
        return {"resolved": 1.0 if self.resolved else 0.0, "fail_to_pass": self.fail_to_pass,
                "pass_to_pass": self.pass_to_pass}


def grade_log(instance: Instance, log: str, model_patch: str, model_name: str) -> Verdict:
    """Grade ``log`` (the eval script's output) for a prediction of ``model_patch``."""
    spec = instance.test_spec()
    prediction = {"instance_id": instance.instance_id, "model_name_or_path": model_name,
                  "model_patch": model_patch}
    fd, path = tempfile.mkstemp(prefix="swebench-", suffix=".log")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(log)
        report = get_eval_report(test_spec=spec, prediction=prediction, test_log_path=path,
                                 include_tests_status=True)[instance.instance_id]
    finally:
        os.unlink(path)
    tests = report.get("tests_status")
    fail_to_pass = pass_to_pass = 0.0
    if tests:
        fail_to_pass, pass_to_pass = float(compute_fail_to_pass(tests)), float(compute_pass_to_pass(tests))
    infra = None
    if report.get("infra_failure"):
        infra = str(report.get("infra_failure_reason") or "infrastructure failure")
    return Verdict(instance.instance_id, report, fail_to_pass, pass_to_pass, infra,
                   START_TEST_OUTPUT in log and END_TEST_OUTPUT in log)


def test_counts(report: dict[str, Any]) -> dict[str, dict[str, int]]:
    """How many FAIL_TO_PASS / PASS_TO_PASS tests succeeded and failed."""
    tests = report.get("tests_status") or {}
    return {key: {"success": len(tests.get(key, {}).get("success", [])),
                  "failure": len(tests.get(key, {}).get("failure", []))}
            for key in (FAIL_TO_PASS, PASS_TO_PASS)}
