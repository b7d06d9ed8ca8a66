"""Reading SWE-bench instances from the official dataset files, checked one by one.

``-b dataset=`` names a dataset of the Hugging Face Hub (``OWNER/NAME[:SPLIT]``, read through the ``datasets``
library and its cache: :mod:`agentcompass_swebench.hub`), a JSONL, JSON or Parquet file as exported from the hub
(every row one instance, with the 5.x fields ``image``, ``eval_script``, ``log_parser`` and ``eval_type``), or a
directory holding the hub's layout for a split: ``SPLIT.parquet``, ``SPLIT.jsonl`` or ``data/SPLIT-*.parquet``.
A file whose rows carry a ``split`` column (a task repository's export) is filtered by ``-b split=``.

Every instance goes through ``swebench.harness.utils.make_test_spec``, the harness's own constructor, so an
instance the official harness could not grade is refused here, before any task runs, with one line naming the
file, the row and what is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcompass.errors import UsageError

from agentcompass_swebench.hub import HubDataset, hub_rows

#: Fields every instance must carry (what ``make_test_spec`` and the agent's task need).
REQUIRED = ("instance_id", "repo", "version", "base_commit", "problem_statement", "image", "eval_script",
            "log_parser", "eval_type", "FAIL_TO_PASS", "PASS_TO_PASS")
#: The 5.x fields an export from an older swebench lacks.
FIELDS_5X = ("image", "eval_script", "log_parser", "eval_type")


class DatasetError(UsageError):
    """A dataset file, or one instance in it, that cannot be used (one line naming it)."""


@dataclass(frozen=True)
class Instance:
    """One checked instance: its raw row (as the official tools read it) and where it came from."""

    row: Mapping[str, Any]
    source: str

    @property
    def instance_id(self) -> str:
        return str(self.row["instance_id"])

    @property
    def repo(self) -> str:
        return str(self.row["repo"])

    @property
    def base_commit(self) -> str:
        return str(self.row["base_commit"])

    @property
    def gold_patch(self) -> str | None:
        patch = self.row.get("patch")
        return patch if isinstance(patch, str) and patch.strip() else None

    def test_spec(self) -> Any:
        """The harness's :class:`swebench.types.TestSpec` for this instance."""
        from swebench.harness.utils import make_test_spec

        return make_test_spec(dict(self.row))


def _rows_jsonl(path: Path) -> Iterable[tuple[str, Any]]:
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield f"{path}:{number}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"swebench: {path} line {number} is not JSON ({exc.msg})") from None


def _rows_json(path: Path) -> Iterable[tuple[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"swebench: {path} is not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, list):
        raise DatasetError(f"swebench: {path} holds a JSON {type(data).__name__}, not a list of instances")
    return ((f"{path}[{i}]", row) for i, row in enumerate(data))


def _rows_parquet(path: Path) -> Iterable[tuple[str, Any]]:
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several kinds for a file that is not Parquet
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatasetError(f"swebench: {path} is not a readable Parquet file ({first})") from None
    return ((f"{path} row {i + 1}", row) for i, row in enumerate(rows))


READERS = {".jsonl": _rows_jsonl, ".json": _rows_json, ".parquet": _rows_parquet}


def dataset_files(path: Path, split: str) -> list[Path]:
    """The files ``-b dataset=`` names for ``split``: the file itself, or the hub's layout in a directory."""
    if path.is_file():
        if path.suffix not in READERS:
            raise DatasetError(f"swebench: {path}: expected a .jsonl, .json or .parquet file")
        return [path]
    if not path.is_dir():
        raise DatasetError(f"swebench: -b dataset={path}: no such file or directory (a dataset of the Hugging Face "
                           "Hub is named OWNER/NAME[:SPLIT])")
    for candidate in (path / f"{split}.parquet", path / f"{split}.jsonl", path / f"{split}.json"):
        if candidate.is_file():
            return [candidate]
    shards = sorted((path / "data").glob(f"{split}-*.parquet"))
    if shards:
        return shards
    raise DatasetError(
        f"swebench: {path} holds no file for split {split!r} ({split}.parquet, {split}.jsonl or "
        f"data/{split}-*.parquet)"
    )


def check_instance(row: Any, where: str) -> Instance:
    """``row`` as an :class:`Instance`, or a :class:`DatasetError` naming ``where`` and what is wrong."""
    if not isinstance(row, dict):
        raise DatasetError(f"swebench: {where}: an instance is a JSON object, not {type(row).__name__}")
    name = row.get("instance_id")
    label = f"{where} (instance {name!r})" if isinstance(name, str) and name else where
    missing = [key for key in REQUIRED if row.get(key) in (None, "")]
    if missing:
        hint = ""
        if set(missing) & set(FIELDS_5X):
            hint = (" — an export from swebench before 5.0? Use the dataset as published for swebench 5.x, whose "
                    "instances carry image, eval_script, log_parser and eval_type")
        raise DatasetError(f"swebench: {label}: missing {', '.join(missing)}{hint}")
    for key in ("instance_id", "repo", "base_commit", "image", "eval_script", "problem_statement"):
        if not isinstance(row[key], str):
            raise DatasetError(f"swebench: {label}: {key} is {type(row[key]).__name__}, not a string")
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        value = row[key]
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise DatasetError(f"swebench: {label}: {key} is not a JSON list of test names") from None
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise DatasetError(f"swebench: {label}: {key} is not a list of test names")
    from swebench.harness.constants import EvalType
    from swebench.harness.log_parsers import PARSER_REGISTRY

    if row["log_parser"] not in PARSER_REGISTRY:
        raise DatasetError(f"swebench: {label}: log_parser {row['log_parser']!r} is not one swebench "
                           f"{_version()} knows")
    if row["eval_type"] not in {e.value for e in EvalType}:
        raise DatasetError(f"swebench: {label}: eval_type {row['eval_type']!r} is not one of "
                           f"{', '.join(e.value for e in EvalType)}")
    instance = Instance(row=row, source=where)
    try:
        instance.test_spec()
    except Exception as exc:
        raise DatasetError(f"swebench: {label}: swebench cannot make a test spec of it ({exc})") from None
    return instance


def _version() -> str:
    import swebench

    return str(swebench.__version__)


def _rows(source: Path | HubDataset, split: str) -> Iterable[tuple[str, Any]]:
    if isinstance(source, HubDataset):
        yield from hub_rows(source, split)
        return
    for file in dataset_files(source, split):
        yield from READERS[file.suffix](file)


def load_instances(path: Path | HubDataset, split: str) -> dict[str, Instance]:
    """Every instance of ``split`` in ``path`` (a file, a directory, or a dataset of the Hub), by id, in file
    order. Ids must be unique."""
    instances: dict[str, Instance] = {}
    for where, row in _rows(path, split):
        if isinstance(row, dict) and row.get("split") not in (None, "", split):
            continue
        instance = check_instance(row, where)
        if instance.instance_id in instances:
            raise DatasetError(f"swebench: {where}: instance {instance.instance_id!r} appears twice "
                               f"(first at {instances[instance.instance_id].source})")
        instances[instance.instance_id] = instance
    if not instances:
        raise DatasetError(f"swebench: {path} holds no instance of split {split!r}")
    return instances
