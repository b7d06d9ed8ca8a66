"""The scanners' findings in both exports: a scanned copy of the react run exported by the real CLI carries each
finding on its attempt's sample (Inspect ``metadata["findings"]``) and trajectory (ATIF
``extra.agentcompass.findings``), and nothing on the others; findings are never scores."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from agentcompass.redaction import Redactor
from agentcompass.runtime.scanning import Evidence, Finding
from agentcompass.scanning import store
from inspect_ai.log import read_eval_log

from tests.export.runs import jsonl, run_cli


def scanned_copy(runs: dict[str, Path], tmp_path: Path) -> tuple[Path, Finding]:
    run_dir = tmp_path / "react"
    shutil.copytree(runs["react"], run_dir)
    first = next(jsonl(run_dir / "results.jsonl"))
    finding = Finding("reward-hacking", first["task_id"], first["trial"], first["attempt"], "high",
                      "the agent read the task's tests", (Evidence("step", "cat tests/test.sh", 0),))
    store.append(run_dir / "scans.jsonl", [finding], Redactor())
    return run_dir, finding


def test_inspect_samples_carry_their_attempts_findings(runs: dict[str, Path], tmp_path: Path) -> None:
    run_dir, finding = scanned_copy(runs, tmp_path)
    done = run_cli("export", "inspect", str(run_dir), "-o", str(tmp_path / "log.eval"))
    assert done.returncode == 0, done.stderr
    log = read_eval_log(str(tmp_path / "log.eval"))
    assert log.samples
    by_id = {(s.id, s.epoch): s for s in log.samples}
    flagged = by_id[(finding.task_id, finding.trial)]
    assert flagged.metadata["findings"] == [json.loads(json.dumps(dataclasses.asdict(finding)))]
    assert "reward-hacking" not in (flagged.scores or {})
    assert all("findings" not in s.metadata for key, s in by_id.items() if key != (finding.task_id, finding.trial))


def test_atif_trajectories_carry_their_attempts_findings(runs: dict[str, Path], tmp_path: Path) -> None:
    run_dir, finding = scanned_copy(runs, tmp_path)
    done = run_cli("export", "atif", str(run_dir), "-o", str(tmp_path / "atif"))
    assert done.returncode == 0, done.stderr
    extras = {(t["extra"]["agentcompass"]["task_id"], t["extra"]["agentcompass"]["trial"]): t["extra"]["agentcompass"]
              for t in (json.loads(p.read_text()) for p in (tmp_path / "atif").rglob("*.json"))
              if "agentcompass" in t.get("extra", {})}
    assert extras[(finding.task_id, finding.trial)]["findings"] == [json.loads(json.dumps(dataclasses.asdict(finding)))]
    assert all("findings" not in e for key, e in extras.items() if key != (finding.task_id, finding.trial))
