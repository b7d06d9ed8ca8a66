"""An observer plugin for subprocess tests: every task event and model-call event of the run, appended as one
JSON line each (with ``kind``) to the file ``AGENTCOMPASS_TEST_EVENTS`` names, flushed as it happens.
``tests.helpers.cli`` adds it when that variable is set."""

from __future__ import annotations

import json
import os
from typing import Any

from agentcompass import hookimpl
from agentcompass.serialization import unstructure

VARIABLE = "AGENTCOMPASS_TEST_EVENTS"


def _append(kind: str, event: Any) -> None:
    with open(os.environ[VARIABLE], "a") as out:
        out.write(json.dumps({"kind": kind, **unstructure(event)}, default=str) + "\n")


@hookimpl
def agentcompass_task_event(event: Any) -> None:
    _append("task", event)


@hookimpl
def agentcompass_model_call(event: Any) -> None:
    _append("model_call", event)
