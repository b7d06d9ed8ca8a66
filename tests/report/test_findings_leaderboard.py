"""A suite's leaderboard counts each cell's flagged attempts: a real suite (made by the real CLI), two cells scanned
(one with two more attempts flagged), one not scanned (a dash, not a zero)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agentcompass.redaction import Redactor
from agentcompass.runtime.run_reader import leaderboard
from agentcompass.runtime.scanning import Evidence, Finding
from agentcompass.scanning import store
from agentcompass_report.leaderboard import leaderboard_page

from tests.helpers.cli_processes import run_cli_subprocess

SUITE = """
[defaults]
benchmark = "example_interactive"
harness = "none"
model = "mock"

[[run]]
name = "flagged"
seed = 1

[[run]]
name = "clean"
seed = 2

[[run]]
name = "unscanned"
seed = 3
"""


def test_each_cell_shows_how_many_of_its_attempts_were_flagged(tmp_path: Path) -> None:
    (tmp_path / "suite.toml").write_text(SUITE)
    out = tmp_path / "out"
    done = run_cli_subprocess("suite", "run", str(tmp_path / "suite.toml"), "-o", str(out), testing=False,
                              timeout=300)
    assert done.returncode == 0, done.stderr
    for cell in ("flagged", "clean"):
        scanned = run_cli_subprocess("scan", str(out / cell), testing=False)
        assert scanned.returncode == 0, scanned.stderr
    results = [json.loads(line) for line in (out / "flagged" / "results.jsonl").read_text().splitlines()]
    store.append(out / "flagged" / "scans.jsonl", [
        Finding(scanner, r["task_id"], r["trial"], r["attempt"], "low", "seen", (Evidence("result", "x"),))
        for r in results[:2] for scanner in ("refusal", "loop")], Redactor())

    def attempts(cell: str) -> int:
        return len({(d["task_id"], d["trial"], d["attempt"]) for d in store.read(out / cell / "scans.jsonl")})

    expected = {"flagged": attempts("flagged"), "clean": attempts("clean"), "unscanned": None}
    assert expected["flagged"] >= 2
    cells = {c["name"]: c for b in leaderboard(out)["benchmarks"] for c in b["cells"]}
    assert {name: c["flagged"] for name, c in cells.items()} == expected
    page, _ = leaderboard_page(out, Redactor())
    shown = {m.group(1): m.group(2) for m in re.finditer(
        r'data-cell="([^"]+)".*?<td class="num flagged">(.*?)</td>', page)}
    assert shown["flagged"] == f'<span class="errtext">{expected["flagged"]}</span>'
    assert shown["clean"] in ("0", f'<span class="errtext">{expected["clean"]}</span>')
    assert "not scanned" in shown["unscanned"]
