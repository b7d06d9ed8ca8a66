"""Harbor's dataset registry: a JSON list of datasets, read the way Harbor 0.25 reads it
(``harbor.models.registry.DatasetSpec``, ``harbor.registry.client.json``).

::

    [{"name": "terminal-bench", "version": "2.0", "description": "...",
      "tasks": [{"name": "hello-world", "git_url": "https://github.com/...", "git_commit_id": "0123...",
                 "path": "tasks/hello-world"}, ...],
      "metrics": [{"type": "mean", "kwargs": {}}]}, ...]

A task without ``git_url`` is a local directory (``path``). ``NAME`` without a version is its latest version as
Harbor picks it: ``head`` when there is one, else the highest version number, else the lexically last. The
registry is a URL (``http(s)://``, ``file://``) or a file; a URL's last copy is kept in the cache and used when
the URL cannot be reached (said in the log).
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agentcompass.runtime.logs import get_logger

log = get_logger(plugin="harbor")

#: Harbor's registry (``harbor.constants.DEFAULT_REGISTRY_URL``).
DEFAULT_REGISTRY_URL = "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"
#: Harbor's metric types (``harbor.models.metric.type.MetricType``).
METRIC_TYPES = ("mean", "sum", "min", "max", "uv-script")
FETCH_TIMEOUT = 60.0


class RegistryError(ValueError):
    """The registry cannot be read, or does not hold what was asked for."""


@dataclass(frozen=True)
class RegistryTask:
    """One task of a dataset: a directory ``path`` of the repository ``git_url`` at ``git_commit_id`` (the
    repository's ``HEAD`` when ``None``), or a local directory when there is no ``git_url``."""

    name: str
    path: str
    git_url: str | None = None
    git_commit_id: str | None = None


@dataclass(frozen=True)
class DatasetMetric:
    """A dataset-level metric (``harbor.models.metric.config.MetricConfig``)."""

    type: str = "mean"
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    version: str
    description: str
    tasks: tuple[RegistryTask, ...]
    metrics: tuple[DatasetMetric, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


def _string(row: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = row.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise RegistryError(f"{where}: '{key}' must be a string, got {value!r}")
    return value


def _task(row: Any, where: str) -> RegistryTask:
    if not isinstance(row, dict):
        raise RegistryError(f"{where}: a task must be an object, got {row!r}")
    path = _string(row, "path", where)
    assert path is not None
    git_url = _string(row, "git_url", where, required=False)
    if git_url is not None:
        posix = PurePosixPath(path)
        if posix.is_absolute() or ".." in posix.parts:
            raise RegistryError(f"{where}: 'path' {path!r} must be relative to the repository, without '..'")
        path = "" if str(posix) == "." else str(posix)  # "./tasks/x/" is tasks/x
    name = _string(row, "name", where)
    assert name is not None
    return RegistryTask(name=name, path=path, git_url=git_url,
                        git_commit_id=_string(row, "git_commit_id", where, required=False) or None)


def _metric(row: Any, where: str) -> DatasetMetric:
    if not isinstance(row, dict):
        raise RegistryError(f"{where}: a metric must be an object, got {row!r}")
    kind = row.get("type", "mean")
    if kind not in METRIC_TYPES:
        raise RegistryError(f"{where}: metric type {kind!r} is not one of {', '.join(METRIC_TYPES)}")
    kwargs = row.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise RegistryError(f"{where}: a metric's 'kwargs' must be an object")
    return DatasetMetric(type=kind, kwargs=dict(kwargs))


def parse_registry(text: str, where: str) -> list[DatasetSpec]:
    """The datasets of a registry's JSON text (``where`` names it in errors)."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RegistryError(f"{where} is not valid JSON ({exc})") from None
    if not isinstance(rows, list):
        raise RegistryError(f"{where} must be a JSON list of datasets")
    specs = []
    for i, row in enumerate(rows):
        at = f"{where}: dataset #{i + 1}"
        if not isinstance(row, dict):
            raise RegistryError(f"{at} must be an object")
        name, version = _string(row, "name", at), row.get("version")
        if isinstance(version, (int, float)) and not isinstance(version, bool):
            version = str(version)
        if not isinstance(version, str) or not version:
            raise RegistryError(f"{at} ({name}): 'version' must be a string, got {version!r}")
        tasks, metrics = row.get("tasks"), row.get("metrics") or []
        if not isinstance(tasks, list) or not isinstance(metrics, list):
            raise RegistryError(f"{at} ({name}): 'tasks' and 'metrics' must be lists")
        at = f"{where}: {name}@{version}"
        assert name is not None
        specs.append(DatasetSpec(
            name=name, version=version, description=str(row.get("description") or ""),
            tasks=tuple(_task(t, f"{at} task #{j + 1}") for j, t in enumerate(tasks)),
            metrics=tuple(_metric(m, f"{at}") for m in metrics),
        ))
    return specs


_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)(?:[-_.]?(a|alpha|b|beta|rc|c)[-_.]?(\d*))?(?:[-_.]?post(\d+))?$", re.I)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2}


def _version_key(version: str) -> tuple[Any, ...] | None:
    """An ordering key for a PEP 440-style version number (``2.0``, ``1.1rc1``, ``3.0.post1``), else ``None``."""
    match = _VERSION.match(version.strip())
    if match is None:
        return None
    release = [int(p) for p in match.group(1).split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    pre = (_PRE_RANK[match.group(2).lower()], int(match.group(3) or 0)) if match.group(2) else (9, 0)
    return (tuple(release), pre, int(match.group(4) or -1))


def latest_version(versions: list[str]) -> str:
    """Harbor's ``resolve_version``: ``head``, else the highest version number, else the lexically last."""
    if "head" in versions:
        return "head"
    numbered = [(key, v) for v in versions if (key := _version_key(v)) is not None]
    if numbered:
        return max(numbered, key=lambda kv: kv[0])[1]
    return sorted(versions)[-1]


def select(specs: list[DatasetSpec], ref: str, where: str) -> DatasetSpec:
    """The dataset ``NAME@VERSION`` (or ``NAME``: its latest version) of a registry."""
    name, _, version = ref.partition("@")
    matching = [s for s in specs if s.name == name]
    if not matching:
        known = ", ".join(sorted({s.name for s in specs})[:20]) or "none"
        raise RegistryError(f"no dataset {name!r} in the registry {where} (its datasets: {known})")
    if not version:
        version = latest_version([s.version for s in matching])
    for spec in matching:
        if spec.version == version:
            return spec
    versions = ", ".join(s.version for s in matching)
    raise RegistryError(f"no version {version!r} of dataset {name!r} in the registry {where} "
                        f"(its versions: {versions})")


def _is_url(source: str) -> bool:
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", source) is not None


def read_registry(source: str, cache: Path) -> tuple[list[DatasetSpec], str]:
    """The datasets of the registry ``source`` (a URL or a file) and what names it in messages. A URL's copy is
    saved under ``cache`` and read when the URL cannot be reached."""
    if not _is_url(source):
        path = Path(source).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RegistryError(f"cannot read the registry file {path}: {exc.strerror or exc}") from None
        return parse_registry(text, str(path)), str(path)
    copy = cache / "registries" / (hashlib.sha256(source.encode()).hexdigest()[:20] + ".json")
    try:
        with urllib.request.urlopen(source, timeout=FETCH_TIMEOUT) as response:
            text = response.read().decode("utf-8")
    except (urllib.error.URLError, OSError, UnicodeDecodeError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        if not copy.is_file():
            raise RegistryError(
                f"cannot fetch the registry {source} ({reason}) and there is no copy of it in the cache "
                f"({copy.parent}): check the network, or pass -b registry=FILE") from None
        log.warning("harbor.registry_offline", registry=source, copy=str(copy), error=str(reason)[:200])
        return parse_registry(copy.read_text(encoding="utf-8"), f"{source} (cached copy)"), source
    specs = parse_registry(text, source)
    copy.parent.mkdir(parents=True, exist_ok=True)
    scratch = copy.with_suffix(f".{hashlib.sha256(text.encode()).hexdigest()[:8]}.tmp")
    scratch.write_text(text, encoding="utf-8")
    scratch.replace(copy)
    return specs, source
