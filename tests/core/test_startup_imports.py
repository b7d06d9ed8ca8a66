"""Start-up: what the CLI imports before it knows the command. The validation engine (and the results code it
pulls in) is imported by ``agentcompass validate`` only, in a real child process."""

from __future__ import annotations

import subprocess
import sys

from agentcompass.cli.validate import DEFAULT_TRIALS as CLI_DEFAULT_TRIALS
from agentcompass.validation import DEFAULT_TRIALS


def imported_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_the_cli_module_does_not_import_the_validation_engine() -> None:
    modules = imported_after("import agentcompass.cli.main")
    assert "agentcompass.cli.validate" in modules  # the command is there ...
    assert "agentcompass.validation" not in modules  # ... its engine is not, until it runs


def test_validate_trials_default_is_the_engines() -> None:
    assert CLI_DEFAULT_TRIALS == DEFAULT_TRIALS
