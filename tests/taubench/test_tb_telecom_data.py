"""Telecom's data as the benchmark reads it: the 20-task set, another task file with its splits (``-b
task_set=``), TOML databases validated on the host and shipped normalised, the policy composed from its parts,
and a malformed telecom directory named in a one-line usage error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tb_support as s
from agentcompass.errors import UsageError
from agentcompass_taubench import data
from agentcompass_taubench.benchmark import TauBenchBenchmark
from taubench_runner.domains import DomainData
from test_tb_benchmark import request, task_ids

TELECOM = s.ROOT / "domains" / "telecom"


@pytest.fixture
def telecom_copy(tmp_path: Path) -> Path:
    root = tmp_path / "tau2"
    shutil.copytree(s.ROOT, root, ignore=shutil.ignore_patterns("airline", "retail"))
    return root


def test_the_20_task_set_is_the_default():
    ids = task_ids(TauBenchBenchmark(domain="telecom"))
    small = json.loads((TELECOM / "tasks_small.json").read_text())
    assert ids == [f"telecom/{t['id']}" for t in small] and len(ids) == 20
    spec = next(iter(TauBenchBenchmark(domain="telecom").load_tasks(request("oracle"))))
    assert spec.category == "telecom" and spec.metadata["needs_judge"] is False
    assert len(task_ids(TauBenchBenchmark(domain="mock,telecom"))) == 30


def test_a_task_file_without_a_split_file_has_only_the_base_split():
    with pytest.raises(UsageError) as raised:
        task_ids(TauBenchBenchmark(domain="telecom", split="train"))
    assert "tasks_small.json has no split file (split_tasks_small.json), so its only split is 'base'" in \
        str(raised.value) and "\n" not in str(raised.value)


def test_task_set_picks_another_task_file_with_its_splits(telecom_copy: Path):
    directory = telecom_copy / "domains" / "telecom"
    small = json.loads((directory / "tasks_small.json").read_text())
    (directory / "tasks.json").write_text(json.dumps({"tasks": small[:6]}))  # upstream takes {"tasks": [...]} too
    (directory / "split_tasks.json").write_text(json.dumps({"base": [t["id"] for t in small[:4]],
                                                            "train": [small[5]["id"]]}))
    bench = TauBenchBenchmark(domain="telecom", data_dir=str(telecom_copy), task_set="tasks.json")
    assert task_ids(bench) == [f"telecom/{t['id']}" for t in small[:4]]
    train = TauBenchBenchmark(domain="telecom", data_dir=str(telecom_copy), task_set="tasks.json", split="train")
    assert task_ids(train) == [f"telecom/{small[5]['id']}"]


def test_a_missing_task_file_names_the_ones_there():
    with pytest.raises(UsageError) as raised:
        task_ids(TauBenchBenchmark(domain="telecom", task_set="tasks_full.json"))
    assert "domains/telecom/tasks_full.json is missing (domain 'telecom'; task files there: tasks_small.json)" in \
        str(raised.value)


@pytest.mark.parametrize(("breakage", "named"), [
    (lambda d: (d / "tech_support_manual.md").unlink(), "domains/telecom/tech_support_manual.md is missing"),
    (lambda d: (d / "user_db.toml").unlink(), "domains/telecom/user_db.toml is missing"),
    (lambda d: (d / "user_db.toml").write_text("[device\n"), "domains/telecom/user_db.toml is not valid TOML"),
    (lambda d: (d / "db.toml").write_text((d / "db.toml").read_text().replace('status = "Active"',
                                                                              'status = "Dormant"', 1)),
     "domains/telecom/db.toml does not match tau2's telecom data model: 1 validation error for TelecomDB"),
    (lambda d: (d / "user_db.toml").write_text((d / "user_db.toml").read_text() + "\n[gadget]\nx = 1\n"),
     "domains/telecom/user_db.toml does not match tau2's telecom data model: 1 validation error for TelecomUserDB"),
])
def test_a_malformed_telecom_directory_names_the_file(telecom_copy: Path, breakage, named: str):  # type: ignore[no-untyped-def]
    breakage(telecom_copy / "domains" / "telecom")
    with pytest.raises(UsageError) as raised:
        task_ids(TauBenchBenchmark(domain="telecom", data_dir=str(telecom_copy)), request("oracle"))
    assert named in str(raised.value) and "\n" not in str(raised.value)


def test_the_staging_ships_normalised_json_and_the_policy_parts():
    staged = data.Staging().get(s.ROOT, "telecom") / "data" / "telecom"
    assert sorted(p.name for p in staged.iterdir()) == ["db.json", "main_policy.md", "tech_support_manual.md",
                                                        "user_db.json"]
    shipped = DomainData.load("telecom", str(staged), trusted=True).environment()
    source = DomainData.load("telecom", str(TELECOM)).environment()
    assert (shipped.get_db_hash(), shipped.get_user_db_hash()) == (source.get_db_hash(), source.get_user_db_hash())
    assert shipped.policy == source.policy
    main = (TELECOM / "main_policy.md").read_text()
    manual = (TELECOM / "tech_support_manual.md").read_text()
    assert source.policy == (f"<main_policy>\n{main}\n</main_policy>\n<tech_support_policy>\n{manual}\n"
                             "</tech_support_policy>")
    # dates and datetimes as upstream's json.dumps(default=str) writes them; enums as their values
    device = json.loads((staged / "db.json").read_text())["devices"][0]
    assert device["activation_date"] == "2025-01-20 14:30:00" and device["device_type"] == "phone"


def test_the_workflow_policy_variant_is_staged_and_requested():
    with pytest.raises(UsageError) as raised:
        TauBenchBenchmark(domain="mock,telecom", policy="workflow")
    assert str(raised.value) == ("taubench option 'policy': domain 'mock' has no policy variant 'workflow'; "
                                 "variants: default")
    bench = TauBenchBenchmark(domain="telecom", policy="workflow")
    assert len(task_ids(bench, request("oracle"))) == 20
    staged = bench.staging.get(s.ROOT, "telecom") / "data" / "telecom"
    assert sorted(p.name for p in staged.glob("*.md")) == ["main_policy.md", "tech_support_workflow.md"]
    workflow = DomainData.load("telecom", str(staged), trusted=True, policy_variant="workflow")
    assert (TELECOM / "tech_support_workflow.md").read_text() in workflow.policy
