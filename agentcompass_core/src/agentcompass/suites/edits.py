"""A resumed suite and its edited suite file: a cell that never started takes the file's definition now.

``suite.json`` keeps every cell as the suite started it, and a resume runs those. A cell that could not start
(a bad option, an unknown plugin) would then fail the same way on every resume; so a resume reads the suite
file again (``suite.json``'s ``source``) and a cell with no run directory yet (no ``run.json``) takes the file's
definition of the same name when it differs. A cell that already started keeps its recorded definition: its
results so far were made with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from agentcompass.errors import AgentCompassError
from agentcompass.results.lines import RUN_JSON
from agentcompass.suites.cell_request import cell_request
from agentcompass.suites.cell_state import SuiteDirectory, SuiteRecord
from agentcompass.suites.suite_file import Cell, load_suite_file


@dataclass(frozen=True)
class SuiteEdits:
    """What a resume takes from the edited suite file: the cells it replaces (by name), and a note per cell
    on what it took or left."""

    cells: dict[str, Cell]
    notes: dict[str, str]
    source: str = ""

    def apply(self, cells: list[Cell]) -> list[Cell]:
        return [self.cells.get(c.name, c) for c in cells]


def suite_edits(directory: SuiteDirectory, record: SuiteRecord) -> SuiteEdits:
    """The edits of ``record.source`` a resume of ``directory`` takes (none when the file is gone or unreadable:
    the recorded cells run as they are)."""
    source = Path(record.source)
    if not source.is_file():
        return SuiteEdits({}, {})
    try:
        plan = load_suite_file(source)
    except AgentCompassError:
        return SuiteEdits({}, {})
    in_file = {c.name: c for c in plan.cells}
    taken: dict[str, Cell] = {}
    notes: dict[str, str] = {}
    for cell in record.cells:
        edited = in_file.get(cell.name)
        if edited is None or not _differs(edited, cell, source):
            continue
        if (directory.cell_dir(cell.name) / RUN_JSON).is_file():
            notes[cell.name] = (f"keeps its recorded definition: it has started already, so the edit in {source} is "
                                "not taken (start a new suite to run the edited one)")
            continue
        taken[cell.name] = replace(edited, origin=cell.origin)
        notes[cell.name] = f"took the edited definition from {source} (it had not started)"
    return SuiteEdits(taken, notes, str(source))


def _differs(edited: Cell, recorded: Cell, source: Path) -> bool:
    """Whether the file's cell says something else than the recorded one (recorded options are kept as checked,
    a relative path made absolute, say: the file's are compared checked too)."""
    if dict(edited.options) == dict(recorded.options):
        return False
    try:
        _, _, checked = cell_request(edited.options, f"{source} cell {edited.name!r}", source.parent)
    except AgentCompassError:
        return True  # still bad, but not what was recorded: taken, so the resume names its error
    return checked != dict(recorded.options)
