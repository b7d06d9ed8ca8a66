"""A cell's `run` options (TOML names) → the validated run request, through the run config's own parser
(:class:`agentcompass.run_config.RunOptions`): a suite cell takes exactly the options of a run config file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentcompass.run_config import RunOptions
from agentcompass.runtime.types import RunRequest


def cell_request(options: Mapping[str, Any], source: str, base_dir: Path | None = None
                 ) -> tuple[RunRequest, frozenset[str], dict[str, Any]]:
    """The cell's request, the request fields its options set (``Runner(given=...)``), and its checked options
    (what ``suite.json`` keeps: a relative ``prices`` path made absolute from ``base_dir``, the suite file's
    directory). A bad option is a UsageError naming the key and ``source``."""
    parsed = RunOptions.parse(dict(options), source=source, base_dir=base_dir)
    return parsed.request(), parsed.given_fields(), dict(parsed.values)
