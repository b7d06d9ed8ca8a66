"""``-b key=value`` options of the ``swebench`` benchmark, parsed once into a frozen value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime.options import boolean

from agentcompass_swebench.hub import HubDataset, parse_hub_name
from agentcompass_swebench.images import ImageNaming, ImagePolicy

WHAT = "swebench option"
VALID = ("dataset", "split", "instance_ids", "hints", "image_namespace", "image_template", "pull", "build",
         "task_repo", "eval_timeout", "network", "memory", "cpus", "model_name", "predictions")
#: The official harness's default test timeout (``run_evaluation --timeout``).
DEFAULT_EVAL_TIMEOUT = 1800.0


def _seconds(name: str, value: Any) -> float:
    try:
        seconds = float(str(value).strip())
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise UsageError(f"{WHAT} {name!r} must be a positive number of seconds, got {value!r}")
    return seconds


@dataclass(frozen=True)
class Options:
    #: A file or directory, or a dataset of the Hugging Face Hub by name (``OWNER/NAME[:SPLIT]``).
    dataset: Path | HubDataset
    split: str = "test"
    instance_ids: tuple[str, ...] = ()
    hints: bool = False
    naming: ImageNaming = field(default_factory=ImageNaming)
    images: ImagePolicy = field(default_factory=ImagePolicy)
    eval_timeout: float = DEFAULT_EVAL_TIMEOUT
    network: bool = False
    memory: str | None = None
    cpus: float | None = None
    model_name: str | None = None
    predictions: Path | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> Options:
        unknown = sorted(set(options) - set(VALID))
        if unknown:
            raise UsageError(f"unknown option(s) {', '.join(repr(o) for o in unknown)} for benchmark 'swebench'; "
                             f"valid options: {', '.join(VALID)}")
        if not options.get("dataset"):
            raise UsageError(
                "benchmark 'swebench' needs -b dataset=NAME or FILE: a Hugging Face dataset name such as "
                "SWE-bench/SWE-bench_Verified, or a SWE-bench dataset exported as JSONL or Parquet (see the "
                "swebench plugin's README)"
            )
        dataset, split = _dataset(str(options["dataset"]), options.get("split"))
        cpus = None
        if options.get("cpus") not in (None, ""):
            try:
                cpus = float(str(options["cpus"]))
            except ValueError:
                cpus = -1.0
            if not cpus > 0:
                raise UsageError(f"{WHAT} 'cpus' must be a positive number, got {options['cpus']!r}")
        predictions = options.get("predictions")
        return cls(
            dataset=dataset,
            split=split,
            instance_ids=tuple(dict.fromkeys(
                v.strip() for v in str(options.get("instance_ids") or "").split(",") if v.strip())),
            hints=boolean(WHAT, "hints", options.get("hints", "false")),
            naming=ImageNaming(namespace=_text(options, "image_namespace"), template=_text(options, "image_template")),
            images=ImagePolicy(pull=boolean(WHAT, "pull", options.get("pull", "true")),
                               build=str(options.get("build") or "no").strip().lower(),
                               task_repo=_text(options, "task_repo")),
            eval_timeout=_seconds("eval_timeout", options.get("eval_timeout", DEFAULT_EVAL_TIMEOUT)),
            network=boolean(WHAT, "network", options.get("network", "false")),
            memory=_text(options, "memory"),
            cpus=cpus,
            model_name=_text(options, "model_name"),
            predictions=Path(str(predictions)).expanduser() if predictions else None,
        )


def _dataset(value: str, split_option: Any) -> tuple[Path | HubDataset, str]:
    """``-b dataset=`` as a path (when one exists there, or it is not shaped like a Hub name) or a Hub dataset,
    and the split: ``NAME:SPLIT``'s, else ``-b split=``, else ``test``; the two must agree."""
    path = Path(value).expanduser()
    hub = None if path.exists() else parse_hub_name(value)
    split = None if split_option in (None, "") else str(split_option)
    if hub is None:
        return path, split or "test"
    if hub.split is not None and split is not None and hub.split != split:
        raise UsageError(f"swebench: -b dataset={value} names split {hub.split!r} but -b split={split}: give one")
    return hub, hub.split or split or "test"


def _text(options: Mapping[str, Any], name: str) -> str | None:
    value = options.get(name)
    return None if value is None or str(value).strip() == "" else str(value).strip()
