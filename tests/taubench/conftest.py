"""Fixtures of the taubench tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import tb_support


@pytest.fixture(scope="session")
def upstream() -> dict:
    """What tau2-bench itself says (``upstream/derive_snapshot.py``)."""
    return json.loads(tb_support.SNAPSHOT.read_text())
