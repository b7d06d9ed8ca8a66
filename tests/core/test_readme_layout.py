"""The README's layout table matches the code: every module and package of the core has its row (every module of
``runtime/`` is named in the runtime row), and every name the table gives exists."""

from __future__ import annotations

import re
from pathlib import Path

import agentcompass

PACKAGE = Path(agentcompass.__file__).resolve().parent
README = Path(__file__).resolve().parents[2] / "README.md"


def layout_rows() -> dict[str, str]:
    """The layout table: each name of the first column (``x.py``, ``pkg/``), with its row's description."""
    text = README.read_text()
    table = text[text.index("| module | its one job |"):].split("\n\n", 1)[0]
    rows: dict[str, str] = {}
    for line in table.splitlines()[2:]:
        first, _, rest = line.strip("|").partition("|")
        for name in re.findall(r"`([^`]+)`", first):
            rows[name] = rest
    return rows


def test_every_module_of_the_core_has_a_row_and_every_row_names_one_that_exists():
    rows = layout_rows()
    present = {p.name + ("/" if p.is_dir() else "") for p in PACKAGE.iterdir()
               if (p.suffix == ".py" or (p.is_dir() and any(p.glob("*.py"))))}
    assert sorted(present - set(rows)) == [], "modules missing from the README's layout table"
    assert sorted(set(rows) - present) == [], "the README's layout table names modules that do not exist"


def test_the_runtime_row_names_every_module_of_the_public_api():
    described = set(re.findall(r"`([a-z_]+)`", layout_rows()["runtime/"]))
    modules = {p.stem for p in (PACKAGE / "runtime").glob("*.py") if p.stem != "__init__"}
    assert sorted(modules - described) == [], "runtime modules the README's layout table does not name"
