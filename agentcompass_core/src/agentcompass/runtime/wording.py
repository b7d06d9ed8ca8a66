"""Counts in words for what the user reads: ``1 call``, ``2 calls``, ``0 calls``."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, the noun in the plural unless ``n`` is 1 (``plural``: an irregular one; default
    ``noun + "s"``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
