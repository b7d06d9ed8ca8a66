"""``--env-arg key=value`` options of the local environment."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from agentcompass.errors import UsageError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
PROCESS_TRACKING = ("auto", "cgroup", "tree")


@dataclasses.dataclass(frozen=True)
class LocalOptions:
    """What ``--env-arg`` can set for ``--env local``."""

    #: Directory that holds the runs' working directories (default: the system's temp directory).
    root: str | None = None
    #: Keep working directories after the run (``env prune --env local`` removes them once the run is over).
    keep: bool = False
    #: How a command's processes are found to be killed: ``cgroup`` (a cgroup v2 per command, plus tree
    #: walking), ``tree`` (walking ``/proc`` from a child subreaper), ``auto`` (cgroup when it works here).
    processes: str = "auto"

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> LocalOptions:
        fields = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in options.items():
            name = key.replace("-", "_")
            if name not in fields:
                raise UsageError(f"unknown local environment option {key!r}; known: {', '.join(sorted(fields))}")
            values[name] = _convert(name, key, raw)
        return cls(**values)


def _convert(name: str, key: str, raw: Any) -> Any:
    if name == "keep":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise UsageError(f"local environment option {key}={raw!r}: expected true or false")
    if name == "processes":
        text = str(raw).strip().lower()
        if text not in PROCESS_TRACKING:
            raise UsageError(f"local environment option {key}={raw!r}: expected one of {', '.join(PROCESS_TRACKING)}")
        return text
    if raw is None:
        return None
    text = str(raw).strip()
    if not text:
        raise UsageError(f"local environment option {key}= needs a directory")
    return text
