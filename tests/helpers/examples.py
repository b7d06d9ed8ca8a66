"""How many examples a hypothesis test tries: all of them in the full run (``--all-tests``, CI), a share in a
default ``uv run pytest``. Both runs check the same properties; the default run looks at fewer inputs.

tests/conftest.py loads the profile (:data:`FULL` or :data:`QUICK`) before any test module is imported, so
``@settings(max_examples=examples(40))`` reads it when the test is defined."""

from __future__ import annotations

import math

from hypothesis import settings

#: The profile of ``--all-tests`` / ``$AGENTCOMPASS_ALL_TESTS`` (CI): every test tries its full count.
FULL = "agentcompass-full"
#: The profile of a default run: tests without their own count try :data:`QUICK_DEFAULT`, those with one
#: (:func:`examples`) :data:`QUICK_SHARE` of it.
QUICK = "agentcompass-quick"
QUICK_DEFAULT = 25
QUICK_SHARE = 0.25
#: The fewest examples any test tries in a default run.
QUICK_LEAST = 3

#: No deadline in either: speed is measured by the bench/ scripts, never by tests.
settings.register_profile(FULL, settings(max_examples=100, deadline=None))
settings.register_profile(QUICK, settings(max_examples=QUICK_DEFAULT, deadline=None))


def quick() -> bool:
    """Whether this is a default (quick) run."""
    return settings.get_current_profile_name() == QUICK


def examples(full: int) -> int:
    """``full`` in a full run; in a default run a quarter of it (at least :data:`QUICK_LEAST`)."""
    return max(min(full, QUICK_LEAST), math.ceil(full * QUICK_SHARE)) if quick() else full
