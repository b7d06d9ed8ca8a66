"""The tau2 data directory on the host: finding it, checking its layout, reading tasks and splits, and the
staging directory ``prepare_task`` uploads into each environment.

The layout is tau2-bench's ``data/tau2``::

    domains/<domain>/tasks.json, split_tasks.json, policy.md, db.json [, user_db.json]
    domains/telecom/tasks_small.json, main_policy.md, tech_support_manual.md, db.toml, user_db.toml
    user_simulator/simulation_guidelines.md, simulation_guidelines_tools.md

(a task file's split file, ``split_<stem>.json``, is optional: without it the only split is ``base``).

Every problem is a :class:`~agentcompass.errors.UsageError` naming the file.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import threading
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from agentcompass.errors import UsageError
from taubench_runner import domains as runner_domains
from taubench_runner import records
from taubench_runner import tasks as task_fields

GUIDELINE_FILES = ("simulation_guidelines.md", "simulation_guidelines_tools.md")
#: Where the staging directory lands in the environment (relative to its working directory).
ENV_ROOT = "taubench"
#: Where a docker image built by :meth:`Staging.context` holds the runner and the data.
IMAGE_ROOT = "/opt/taubench"
BASE_IMAGE = "python:3.11-slim"
DOCKERFILE = f"""FROM {BASE_IMAGE}
COPY taubench {IMAGE_ROOT}
RUN python3 -m compileall -q {IMAGE_ROOT}/taubench_runner
"""


def packaged_root() -> Path:
    """The copy of tau2's data shipped in this package."""
    return Path(str(resources.files("agentcompass_taubench").joinpath("data", "tau2")))


def resolve_root(option: str | None) -> Path:
    """The data directory: the packaged copy, or ``-b data_dir=PATH`` (a ``data/tau2`` directory or a
    tau2-bench checkout that has one)."""
    if option is None:
        return packaged_root()
    path = Path(option).expanduser()
    if not path.is_dir():
        raise UsageError(f"taubench data_dir {option!r} is not a directory")
    if (path / "domains").is_dir():
        return path.resolve()
    if (path / "data" / "tau2" / "domains").is_dir():
        return (path / "data" / "tau2").resolve()
    raise UsageError(
        f"taubench data_dir {option!r} has no domains/ directory (expected tau2's data/tau2 layout: "
        "domains/<domain>/tasks.json, ..., user_simulator/)"
    )


def _read_json(path: Path) -> Any:
    """A data file's content (JSON, or TOML for ``*.toml``), every problem a usage error naming it."""
    if not path.is_file():
        raise UsageError(f"taubench data: {path} is missing")
    kind = "TOML" if path.suffix == ".toml" else "JSON"
    try:
        return runner_domains.parse_data(path.read_text(encoding="utf-8"), path.name)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"taubench data: {path} is not valid {kind} ({exc})") from None


def check_layout(root: Path, domain: str, task_file: str | None = None, policy: str | None = None) -> None:
    """Every file the runner needs for ``domain`` is there (``task_file``, ``policy``: the domain's default
    task file and policy variant)."""
    directory = root / "domains" / domain
    needed = [task_file or runner_domains.tasks_file(domain), *runner_domains.policy_files(domain, policy),
              *runner_domains.db_files(domain)]
    for name in needed:
        if not (directory / name).is_file():
            hint = ""
            if name == task_file:
                present = sorted(p.name for p in directory.glob("tasks*.json"))
                hint = f"; task files there: {', '.join(present) or 'none'}"
            raise UsageError(f"taubench data: {directory / name} is missing (domain {domain!r}{hint})")
    for name in GUIDELINE_FILES:
        if not (root / "user_simulator" / name).is_file():
            raise UsageError(f"taubench data: {root / 'user_simulator' / name} is missing")


def load_tasks(root: Path, domain: str, split: str, task_file: str | None = None,
               policy: str | None = None) -> list[Mapping[str, Any]]:
    """The tasks of ``split`` in the order of the task file (``task_file``: the domain's default), each
    checked as tau2 would. A task file without a split file has one split, ``base``: all its tasks."""
    task_file = task_file or runner_domains.tasks_file(domain)
    check_layout(root, domain, task_file, policy)
    directory = root / "domains" / domain
    tasks_path = directory / task_file
    raw = _read_json(tasks_path)
    if isinstance(raw, Mapping) and "tasks" in raw:  # upstream's load_tasks takes {"tasks": [...]} too
        raw = raw["tasks"]
    if not isinstance(raw, list):
        raise UsageError(f"taubench data: {tasks_path} must hold a list of tasks")
    seen: set[str] = set()
    for task in raw:
        try:
            task_fields.check_task(task)
        except task_fields.TaskError as exc:
            raise UsageError(f"taubench data: {tasks_path}: {exc}") from None
        if task["id"] in seen:
            raise UsageError(f"taubench data: {tasks_path}: task id {task['id']!r} appears twice")
        seen.add(task["id"])
    split_path = directory / runner_domains.split_file(task_file)
    if not split_path.is_file():
        if split != "base":
            raise UsageError(
                f"taubench: domain {domain!r} has no split {split!r}: {tasks_path.name} has no split file "
                f"({split_path.name}), so its only split is 'base' (all its tasks)"
            )
        return list(raw)
    splits = _read_json(split_path)
    if not isinstance(splits, Mapping) or not all(
        isinstance(v, list) and all(isinstance(i, str) for i in v) for v in splits.values()
    ):
        raise UsageError(f"taubench data: {split_path} must map split names to lists of task ids")
    if split not in splits:
        raise UsageError(
            f"taubench: domain {domain!r} has no split {split!r} in {split_path}; splits: {', '.join(splits)}"
        )
    unknown = [i for i in splits[split] if i not in seen]
    if unknown:
        raise UsageError(
            f"taubench data: {split_path}: split {split!r} names task id(s) not in {tasks_path}: "
            f"{', '.join(map(repr, unknown[:5]))}"
        )
    return task_fields.select(raw, splits[split])


class Staging:
    """Per (data directory, domain): a host directory holding the runner package, the domain's policy and
    databases (validated once and written normalised, so the runner only parses them) and the user simulator's
    guidelines, uploaded as a whole into each task's environment. Removed when the process exits."""

    def __init__(self, policy: str | None = None) -> None:
        #: The policy variant shipped (None: each domain's default).
        self.policy = policy
        self._dirs: dict[tuple[Path, str], Path] = {}
        self._contexts: dict[tuple[Path, tuple[str, ...]], Path] = {}
        self._lock = threading.Lock()
        self._base: Path | None = None

    def context(self, root: Path, domains: tuple[str, ...]) -> Path:
        """A docker build context: a ``Dockerfile`` and the staging directories of ``domains`` merged, which
        the image holds under :data:`IMAGE_ROOT` (the docker environment builds it once per run, tagged by
        its content hash, so an unchanged one is reused by later runs)."""
        for domain in domains:
            self.get(root, domain)
        key = (root, domains)
        with self._lock:
            if key not in self._contexts:
                assert self._base is not None
                target = self._base / f"context-{len(self._contexts)}"
                for domain in domains:
                    shutil.copytree(self._dirs[(root, domain)], target / "taubench", dirs_exist_ok=True)
                (target / "Dockerfile").write_text(DOCKERFILE, encoding="utf-8")
                self._contexts[key] = target
            return self._contexts[key]

    def get(self, root: Path, domain: str) -> Path:
        key = (root, domain)
        with self._lock:
            if key not in self._dirs:
                self._dirs[key] = self._build(root, domain)
            return self._dirs[key]

    def _build(self, root: Path, domain: str) -> Path:
        check_layout(root, domain, policy=self.policy)
        if self._base is None:
            self._base = Path(tempfile.mkdtemp(prefix="agentcompass-taubench-"))
            atexit.register(shutil.rmtree, self._base, True)
        target = self._base / f"{domain}-{len(self._dirs)}"
        runner = Path(str(resources.files("taubench_runner")))
        shutil.copytree(runner, target / "taubench_runner", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        data_dir = target / "data" / domain
        data_dir.mkdir(parents=True)
        source = root / "domains" / domain
        for name in runner_domains.policy_files(domain, self.policy):
            shutil.copyfile(source / name, data_dir / name)
        for name, model in runner_domains.db_models(domain).items():
            raw = _read_json(source / name)  # a JSON error names the file
            try:
                normalized = model.validate(raw)
            except records.ValidationError as exc:
                lines = str(exc).splitlines()
                raise UsageError(
                    f"taubench data: {source / name} does not match tau2's {domain} data model: "
                    f"{lines[0]}: {' '.join(line.strip() for line in lines[1:3])}"
                ) from None
            (data_dir / runner_domains.shipped_name(name)).write_text(json.dumps(normalized), encoding="utf-8")
        guidelines = target / "data" / "user_simulator"
        guidelines.mkdir(parents=True)
        for name in GUIDELINE_FILES:
            shutil.copyfile(root / "user_simulator" / name, guidelines / name)
        return target


def env_paths(domain: str, installed: bool = False) -> dict[str, str]:
    """Where the runner and the data are in the environment (uploaded into the working directory, or
    ``installed`` in the image), and where the request and the outputs go (the working directory)."""
    root = IMAGE_ROOT if installed else ENV_ROOT
    return {
        "root": root,
        "data_dir": f"{root}/data/{domain}",
        "guidelines_dir": f"{root}/data/user_simulator",
        "request": f"{ENV_ROOT}/request.json",
        "trajectory": f"{ENV_ROOT}/trajectory.json",
        "evaluation": f"{ENV_ROOT}/evaluation.json",
    }
