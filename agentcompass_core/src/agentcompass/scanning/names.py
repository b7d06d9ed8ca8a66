"""The names of the built-in scanners and the file findings go to (cheap to import)."""

from agentcompass.runtime.scanning import SCANS

__all__ = ["BUILTIN_SCANNERS", "JUDGE", "SCANS"]

#: The built-in scanners that need nothing but the transcript; ``scan`` runs them all when no ``--scanner`` is given.
BUILTIN_SCANNERS: tuple[str, ...] = ("reward-hacking", "environment", "refusal", "gave-up", "loop")
#: The judge scanner's name: ``judge:RUBRIC.md`` asks the run's judge role the rubric about each attempt.
JUDGE = "judge"
