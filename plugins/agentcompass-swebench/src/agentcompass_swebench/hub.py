"""``-b dataset=OWNER/NAME[:SPLIT]``: a dataset of the Hugging Face Hub by its name, read through the ``datasets``
library and its cache (``HF_DATASETS_CACHE``, by default ``~/.cache/huggingface/datasets``).

The first load downloads the dataset into that cache; every later one, also with ``HF_DATASETS_OFFLINE=1`` (or
``HF_HUB_OFFLINE=1``) and no network, reads it from there. A name the Hub does not know, a split the dataset does
not have, or a dataset that is neither cached nor reachable is one :class:`HubDatasetError` saying which and what
to do. ``datasets`` is imported by the first load, never when plugins are listed.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from agentcompass.errors import UsageError

_NAME = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
_SPLIT = re.compile(r"[A-Za-z0-9][\w.-]*")
#: What a file name ends with; ``dir/verified.jsonl`` that does not exist is a missing file, not a Hub name.
FILE_SUFFIXES = (".jsonl", ".json", ".parquet")


class HubDatasetError(UsageError):
    """A Hub dataset that cannot be loaded (one line naming it, and what to do)."""


@dataclass(frozen=True)
class HubDataset:
    """A dataset of the Hub: ``name`` (``OWNER/NAME``) and the ``split`` its ``:SPLIT`` suffix names, if any."""

    name: str
    split: str | None = None

    def __str__(self) -> str:
        return self.name if self.split is None else f"{self.name}:{self.split}"


def parse_hub_name(value: str) -> HubDataset | None:
    """``OWNER/NAME`` or ``OWNER/NAME:SPLIT`` as a :class:`HubDataset`; ``None`` when ``value`` is not shaped like
    one (a path: absolute, relative with ``./``, more than one ``/``, or ending in a dataset file's suffix)."""
    name, colon, split = value.partition(":")
    if not _NAME.fullmatch(name) or name.lower().endswith(FILE_SUFFIXES):
        return None
    if colon and not _SPLIT.fullmatch(split):
        return None
    return HubDataset(name=name, split=split or None)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No progress bars and no info lines from ``datasets`` while it loads (the run's console is ours)."""
    import datasets

    verbosity = datasets.utils.logging.get_verbosity()
    shown = datasets.is_progress_bar_enabled()
    datasets.utils.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        datasets.utils.logging.set_verbosity(verbosity)
        if shown:
            datasets.enable_progress_bars()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_rows(dataset: HubDataset, split: str) -> list[Any]:
    """Every row of ``split`` of ``dataset``, through ``datasets.load_dataset`` and its cache."""
    import datasets
    from datasets.exceptions import DatasetNotFoundError

    cache = datasets.config.HF_DATASETS_CACHE
    where = f"swebench: -b dataset={dataset.name}"
    try:
        with _quiet():
            loaded = datasets.load_dataset(dataset.name, split=split)
    except ConnectionError as exc:  # offline (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE) or no network, not cached
        raise HubDatasetError(
            f"{where}: not in the datasets cache ({cache}) and the Hugging Face Hub is unreachable "
            f"({_first_line(exc)}): load it once with network access (and HF_DATASETS_OFFLINE unset), point "
            "HF_DATASETS_CACHE at a cache that holds it, or give a file (-b dataset=FILE)") from None
    except DatasetNotFoundError as exc:
        raise HubDatasetError(f"{where}: no such dataset on the Hugging Face Hub, or you may not read it "
                              f"({_first_line(exc)}); check the name, or log in (hf auth login)") from None
    except ValueError as exc:
        if "Unknown split" in str(exc):
            raise HubDatasetError(f"{where}: no split {split!r} ({_first_line(exc)})") from None
        raise HubDatasetError(f"{where}: the datasets library cannot load it ({_first_line(exc)})") from None
    except Exception as exc:  # the library raises many kinds; the run still gets one line
        raise HubDatasetError(f"{where}: the datasets library cannot load it ({type(exc).__name__}: "
                              f"{_first_line(exc)})") from None
    return list(loaded)


def hub_rows(dataset: HubDataset, split: str) -> Iterable[tuple[str, Any]]:
    """``(where, row)`` for every row of ``split``: where names the dataset, the split and the row."""
    rows = load_rows(dataset, split)
    return ((f"{dataset.name}[{split}] row {i + 1}", row) for i, row in enumerate(rows))
