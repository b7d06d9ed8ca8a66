"""The suite file: a grid of runs in TOML, turned into named cells.

::

    baseline = "coding-react-mock"     # optional: the cell the leaderboard's differences are against

    [defaults]                         # any `run` option, under the names of the run config file
    trials = 2
    env = "local"

    [matrix]                           # keys that take lists expand to their product
    benchmark = ["example_coding", "example_interactive"]
    harness = ["react", "none"]
    model_args = [{ error_rate = "0" }, { error_rate = "0.5" }]
    name = "{benchmark}-{harness}-e{model_args[error_rate]}"   # optional name template (str.format)
    exclude = [{ benchmark = "example_coding", model_args = { error_rate = "0.5" } }]

    [[run]]                            # one cell each: a name and any `run` option
    name = "interactive-strict"
    benchmark = "example_interactive"
    harness = "none"
    model = "mock"

A cell's options are the defaults, overridden by its matrix values or its ``[[run]]`` table; tables
(``benchmark_args``, ``model_args``, ``models``, ...) merge key by key. Option names and values are checked
by the run config's own parser when the suite starts (:mod:`agentcompass.suites.scheduler`), not here: this
module only knows the file's shape. Everything wrong with the shape is a :class:`SuiteFileError` naming the
file and the key.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcompass.errors import UsageError

#: A cell's name is its directory's name.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=+-]{0,99}$")
TOP_LEVEL_KEYS = ("baseline", "defaults", "matrix", "run")
#: Keys of ``[matrix]`` that are not options.
MATRIX_CONTROL = ("name", "exclude")
#: Where a cell came from: a ``[[run]]`` table or the ``[matrix]``.
FROM_RUN, FROM_MATRIX = "run", "matrix"


class SuiteFileError(UsageError):
    """The suite file's shape is wrong; the message names the file and the key."""


@dataclass(frozen=True)
class Cell:
    """One run of the suite: its directory name, its `run` options (TOML names, defaults merged in), and where
    it came from (``"run"`` or ``"matrix"``: an incompatible matrix cell is skipped, a ``[[run]]`` one is an
    error)."""

    name: str
    options: Mapping[str, Any]
    origin: str = FROM_RUN


@dataclass(frozen=True)
class SuitePlan:
    """The cells of a suite file, in file order (``[[run]]`` tables, then the matrix)."""

    source: str
    cells: tuple[Cell, ...]
    baseline: str | None = None
    excluded: tuple[str, ...] = field(default_factory=tuple)


def load_suite_file(path: Path) -> SuitePlan:
    """Read and expand the suite file at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteFileError(f"cannot read suite file {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SuiteFileError(f"{path} is not valid TOML: {exc}") from None
    return expand(data, str(path))


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; tables merge key by key (recursively)."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def expand(data: Mapping[str, Any], source: str) -> SuitePlan:
    """The cells the parsed suite file ``data`` (from ``source``) describes."""
    unknown = [k for k in data if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise SuiteFileError(f"{source}: unknown key {unknown[0]!r}; a suite file has "
                             f"{', '.join(TOP_LEVEL_KEYS)} (options of a run go under [defaults] or [[run]])")
    defaults = _table(data.get("defaults", {}), "[defaults]", source)
    if "name" in defaults:
        raise SuiteFileError(f"{source}: [defaults] cannot set 'name'; name each [[run]] (or give [matrix] a name "
                             "template)")
    cells: list[Cell] = []
    runs = data.get("run", [])
    if not isinstance(runs, list) or not all(isinstance(r, Mapping) for r in runs):
        raise SuiteFileError(f"{source}: 'run' must be an array of tables ([[run]])")
    for i, table in enumerate(runs, 1):
        name = table.get("name")
        if not isinstance(name, str):
            raise SuiteFileError(f"{source}: [[run]] number {i} has no name; give it name = \"...\"")
        _check_name(name, f"[[run]] number {i}", source)
        cells.append(Cell(name, merge(defaults, {k: v for k, v in table.items() if k != "name"}), FROM_RUN))
    excluded: list[str] = []
    if "matrix" in data:
        matrix_cells, excluded = _expand_matrix(_table(data["matrix"], "[matrix]", source), defaults, source)
        cells += matrix_cells
    if not cells:
        raise SuiteFileError(f"{source} has no cells: add [[run]] tables or a [matrix]")
    seen: dict[str, int] = {}
    for cell in cells:
        seen[cell.name] = seen.get(cell.name, 0) + 1
    twice = sorted(n for n, count in seen.items() if count > 1)
    if twice:
        raise SuiteFileError(f"{source}: cell name {twice[0]!r} is used {seen[twice[0]]} times; names must be "
                             "unique (give the matrix a name template with every key that varies)")
    baseline = data.get("baseline")
    if baseline is not None and (not isinstance(baseline, str) or baseline not in seen):
        raise SuiteFileError(f"{source}: baseline {baseline!r} is not a cell of the suite; cells: "
                             f"{', '.join(c.name for c in cells)}")
    return SuitePlan(source, tuple(cells), baseline, tuple(excluded))


def _table(value: Any, what: str, source: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise SuiteFileError(f"{source}: {what} must be a table")
    return dict(value)


def _check_name(name: str, what: str, source: str) -> None:
    if not NAME_PATTERN.match(name):
        raise SuiteFileError(f"{source}: {what}: cell name {name!r} cannot be a directory name; use letters, "
                             "digits and . _ = + - (not starting with . or -), at most 100 characters")


def _expand_matrix(matrix: dict[str, Any], defaults: Mapping[str, Any], source: str
                   ) -> tuple[list[Cell], list[str]]:
    template = matrix.pop("name", None)
    if template is not None and not isinstance(template, str):
        raise SuiteFileError(f"{source}: [matrix] name must be a template string, e.g. \"{{benchmark}}-{{model}}\"")
    exclude = matrix.pop("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(e, Mapping) for e in exclude):
        raise SuiteFileError(f"{source}: [matrix] exclude must be a list of tables, e.g. "
                             "[{ benchmark = \"x\", harness = \"y\" }]")
    for key, values in matrix.items():
        if not isinstance(values, list) or not values:
            raise SuiteFileError(f"{source}: [matrix] {key} must be a non-empty list of values")
    for entry in exclude:
        stray = [k for k in entry if k not in matrix]
        if stray:
            raise SuiteFileError(f"{source}: [matrix] exclude names {stray[0]!r}, which is not a matrix key "
                                 f"({', '.join(matrix)})")
    keys = list(matrix)
    cells: list[Cell] = []
    excluded: list[str] = []
    for combination in itertools.product(*(matrix[k] for k in keys)):
        values = dict(zip(keys, combination, strict=True))
        options = merge(defaults, values)
        name = _cell_name(template, options, [values[k] for k in keys], source)
        if any(all(values[k] == v for k, v in entry.items()) for entry in exclude):
            excluded.append(name)
            continue
        cells.append(Cell(name, options, FROM_MATRIX))
    return cells, excluded


def _cell_name(template: str | None, options: Mapping[str, Any], values: Sequence[Any], source: str) -> str:
    if template is None:
        name = "-".join(_short(v) for v in values)
    else:
        try:
            name = template.format_map(_Missing(options))
        except (KeyError, IndexError, AttributeError, ValueError) as exc:
            raise SuiteFileError(f"{source}: [matrix] name template {template!r} cannot be filled: {exc}") from None
    name = re.sub(r"[^A-Za-z0-9._=+-]+", "_", name).strip("_")
    _check_name(name, "[matrix]", source)
    return name


def _short(value: Any) -> str:
    if isinstance(value, Mapping):
        return "_".join(f"{k}={_short(v)}" for k, v in value.items())
    return str(value).replace("/", "_")


class _Missing(dict):
    """A template's key that no option has is an error naming it."""

    def __missing__(self, key: str) -> Any:
        raise KeyError(f"{key!r} is not an option of the cell")
