"""``-b dataset=``: the task directories of a Harbor dataset, on this machine.

* ``NAME@VERSION`` / ``NAME`` (its latest version): a dataset of Harbor's registry
  (:mod:`agentcompass_harbor.registry`; ``-b registry=URL|FILE`` for another one), each task fetched at its
  pinned commit (:mod:`agentcompass_harbor.gitfetch`, cached by content, reused offline). A task's id is its
  name in the registry.
* ``git+URL[@REV][#PATH]``: every task directory under ``PATH`` (default: the whole repository) of a git
  repository at ``REV`` (a branch, a tag or a commit; default ``HEAD``). A task's id is its path below ``PATH``.

A local directory stays ``-b path=``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcompass_harbor.config import find_task_dirs
from agentcompass_harbor.gitfetch import FetchError, TreeCache, Wanted
from agentcompass_harbor.registry import (
    DEFAULT_REGISTRY_URL,
    DatasetMetric,
    RegistryError,
    read_registry,
    select,
)

GIT_PREFIX = "git+"


class DatasetError(ValueError):
    """A dataset cannot be resolved or fetched; the message says which and why."""


@dataclass(frozen=True)
class DatasetTask:
    """One task of a dataset, on this machine, and where it came from."""

    task_id: str
    directory: Path
    source: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Dataset:
    #: What names the dataset: ``NAME@VERSION``, or the ``git+`` reference as given.
    label: str
    tasks: tuple[DatasetTask, ...]
    metrics: tuple[DatasetMetric, ...] = ()
    description: str = ""


def resolve(ref: str, *, registry: str | None = None, cache: TreeCache | None = None) -> Dataset:
    """The dataset ``ref`` names, fetched into the cache where needed."""
    ref = ref.strip()
    cache = cache or TreeCache()
    try:
        if ref.startswith(GIT_PREFIX):
            return _from_git(ref, cache)
        return _from_registry(ref, registry or DEFAULT_REGISTRY_URL, cache)
    except (RegistryError, FetchError) as exc:
        raise DatasetError(f"dataset {ref}: {exc}") from None


def parse_git_ref(ref: str) -> tuple[str, str | None, str]:
    """``git+URL[@REV][#PATH]`` as ``(URL, REV, PATH)``: ``@REV`` is the part after the last ``@`` when it holds
    no ``/`` or ``:`` (so ``ssh://git@host/x`` keeps its user)."""
    body = ref[len(GIT_PREFIX):]
    body, _, path = body.partition("#")
    rev: str | None = None
    at = body.rfind("@")
    if at > 0 and body[at + 1:] and not re.search(r"[/:]", body[at + 1:]):
        body, rev = body[:at], body[at + 1:]
    if not body:
        raise DatasetError(f"dataset {ref}: no repository URL after 'git+' (git+URL[@REV][#PATH])")
    path = path.strip("/")
    if ".." in path.split("/"):
        raise DatasetError(f"dataset {ref}: the path {path!r} must stay inside the repository")
    return body, rev, path


def _from_git(ref: str, cache: TreeCache) -> Dataset:
    url, rev, path = parse_git_ref(ref)
    commit = cache.resolve(url, rev)
    wanted = Wanted(url, commit, path)
    directory = cache.fetch([wanted])[wanted]
    found = find_task_dirs(directory)
    if not found:
        raise DatasetError(f"dataset {ref}: no task directory (with a task.toml) under {path or 'the repository'} "
                           f"of {url} at {commit}")
    single = found == [(directory.resolve().name, directory)]
    repo_name = url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    tasks = tuple(
        DatasetTask(task_id=(path.rsplit("/", 1)[-1] or repo_name) if single else task_id, directory=task_dir,
                    source={"git_url": url, "git_commit_id": commit, "path": _join(path, "" if single else task_id)})
        for task_id, task_dir in found
    )
    return Dataset(label=ref, tasks=tasks)


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def _from_registry(ref: str, registry: str, cache: TreeCache) -> Dataset:
    if not ref or ref.startswith("@") or ref.endswith("@"):
        raise DatasetError(f"dataset {ref!r}: expected NAME@VERSION, NAME, or git+URL[@REV][#PATH]")
    specs, where = read_registry(registry, cache.root)
    spec = select(specs, ref, where)
    if not spec.tasks:
        raise DatasetError(f"dataset {spec.ref} of {where} holds no tasks")
    names = [t.name for t in spec.tasks]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise DatasetError(f"dataset {spec.ref} of {where} names several tasks {', '.join(duplicated[:5])}")
    wanted: dict[str, Wanted] = {}
    local: dict[str, Path] = {}
    commits: dict[tuple[str, str | None], str] = {}
    for task in spec.tasks:
        if task.git_url is None:
            local[task.name] = Path(task.path).expanduser()
            continue
        key = (task.git_url, task.git_commit_id)
        if key not in commits:
            commits[key] = cache.resolve(task.git_url, task.git_commit_id)
        wanted[task.name] = Wanted(task.git_url, commits[key], task.path.strip("/"))
    try:
        fetched = cache.fetch(list(wanted.values()))
    except FetchError as exc:
        owners = [n for n, w in wanted.items() if w.commit in str(exc)] or \
            [n for n, w in wanted.items() if w.url in str(exc)]
        named = f" (task {', '.join(owners[:3])}{' ...' if len(owners) > 3 else ''})" if owners else ""
        raise DatasetError(f"dataset {spec.ref}{named}: {exc}") from None
    tasks = []
    for task in spec.tasks:
        if task.name in local:
            directory = local[task.name]
            if not directory.is_dir():
                raise DatasetError(f"dataset {spec.ref}: task {task.name}'s directory {directory} does not exist")
            source: dict[str, Any] = {"path": str(directory)}
        else:
            w = wanted[task.name]
            directory, source = fetched[w], {"git_url": w.url, "git_commit_id": w.commit, "path": w.path}
        tasks.append(DatasetTask(task_id=task.name, directory=directory, source=source))
    return Dataset(label=spec.ref, tasks=tuple(tasks), metrics=spec.metrics, description=spec.description)
