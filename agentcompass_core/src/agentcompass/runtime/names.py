"""Turning identifiers (task ids, run ids) into names that are safe for files, containers and labels."""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str, size: int = 80, *, sep: str = "_", distinct: bool = True) -> str:
    """A readable form of ``text`` made of ``[A-Za-z0-9._-]``, at most ``size`` characters before the suffix.

    :param sep: what replaces each run of other characters.
    :param distinct: when the name had to change, append 8 hex digits of its hash, so distinct ids stay distinct
        (``a/b`` and ``a_b`` get different names).
    """
    cleaned = _UNSAFE.sub(sep, text).strip("._-")[:size] or "x"
    if distinct and cleaned != text:
        cleaned += "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return cleaned
