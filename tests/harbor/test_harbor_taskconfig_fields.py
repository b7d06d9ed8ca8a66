"""Every field of Harbor's ``TaskConfig`` is named in the plugin's README as honoured or refused (with why);
the ones refused but recorded are recorded when a task gives them, the ones refused at the start stop the run;
and the list is Harbor's own (read from the ``harbor`` package, in a test environment of its own)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime import RunRequest
from agentcompass_harbor.benchmark import HarborBenchmark

from tests.harbor.taskdirs import REWARD_BY_EXIT, write_task

README = Path(__file__).resolve().parents[2] / "plugins" / "agentcompass-harbor" / "README.md"
HARBOR_VENV = Path.home() / ".cache" / "agentcompass-tests" / "harbor-0.25.0-venv"

#: Harbor 0.25's TaskConfig: its fields, a section's as ``section.field`` (checked against the package below).
FIELDS = (
    "schema_version", "task.name", "task.version", "task.description", "task.authors", "task.keywords", "metadata",
    "verifier.network_mode", "verifier.allowed_hosts", "verifier.timeout_sec", "verifier.env", "verifier.user",
    "verifier.environment_mode", "verifier.environment", "verifier.collect", "agent.network_mode",
    "agent.allowed_hosts", "agent.timeout_sec", "agent.user", "environment.network_mode",
    "environment.allowed_hosts", "environment.build_timeout_sec", "environment.docker_image", "environment.os",
    "environment.cpus", "environment.memory_mb", "environment.storage_mb", "environment.gpus",
    "environment.gpu_types", "environment.tpu", "environment.mcp_servers", "environment.env",
    "environment.skills_dir", "environment.healthcheck", "environment.workdir", "environment.allow_internet",
    "solution.env", "source", "multi_step_reward_strategy", "steps.name", "steps.agent", "steps.verifier",
    "steps.min_reward", "steps.healthcheck", "steps.artifacts", "artifacts.source", "artifacts.destination",
    "artifacts.exclude", "artifacts.service",
)

#: A field Harbor defines, its section's TOML giving it, and what the task's ``unsupported`` record says.
RECORDED = {
    "verifier.user": ('[agent]\nuser = "root"\n[verifier]\nuser = "nobody"\n', "verifier.user=nobody"),
    "verifier.environment": ('[verifier.environment]\ndocker_image = "python:3.11-slim"\n',
                             "[verifier.environment]"),
    "verifier.collect": ('[[verifier.collect]]\ncommand = "true"\n', "verifier.collect"),
    "environment.mcp_servers": ('[[environment.mcp_servers]]\nname = "docs"\nurl = "http://docs:8000/sse"\n'
                                'headers = {Authorization = "Bearer ${TOKEN}"}\n', "mcp_servers[docs].headers"),
    "artifacts.destination": ('artifacts = [{source = "/app/out", destination = "out"}]\n',
                              "artifacts[].destination"),
    "artifacts.exclude": ('artifacts = [{source = "/app/out", exclude = ["*.tmp"]}]\n', "artifacts[].exclude"),
    "steps.healthcheck": ('[[steps]]\nname = "one"\n[steps.healthcheck]\ncommand = "true"\n',
                          "steps[one].healthcheck"),
    "steps.artifacts": ('[[steps]]\nname = "one"\nartifacts = ["/app/x"]\n', "steps[one].artifacts"),
    "steps.agent": ('[[steps]]\nname = "one"\n[steps.agent]\nuser = "nobody"\n', "steps[one].agent.user"),
    "steps.verifier": ('[[steps]]\nname = "one"\n[steps.verifier]\nuser = "nobody"\n',
                       "steps[one].verifier.user"),
    "artifacts.service": ('artifacts = [{source = "/data/x", service = "db"}]\n', "artifacts[].service"),
}

#: Fields whose task is refused before any task starts, and the error's words.
REFUSED_AT_START = {
    "environment.tpu": ('[environment.tpu]\ntype = "v6e"\ntopology = "2x2"\n', "TPU"),
    "environment.os": ('[environment]\nos = "windows"\n', "only linux"),
}


def readme_rows() -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Every field of Harbor's `TaskConfig`"):]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z_.]+)` \| (.+) \|$", section, re.M)}


def test_the_readme_names_every_field_as_honoured_or_refused() -> None:
    rows = readme_rows()
    assert sorted(rows) == sorted(FIELDS)
    for field, text in rows.items():
        assert re.match(r"^(honoured|refused)\b", text), (field, text)
        assert ":" in text or "refused with" in text or "honoured for" in text, f"{field}: no reason given"


def test_every_refused_and_recorded_field_is_recorded_when_given(tmp_path: Path) -> None:
    rows = readme_rows()
    recorded_in_readme = {f for f, text in rows.items() if "(recorded" in text}
    assert recorded_in_readme == set(RECORDED)
    for i, (field, (toml, words)) in enumerate(RECORDED.items()):
        root = tmp_path / f"t{i}"
        write_task(root, "task", instruction="Do it.", test=REWARD_BY_EXIT, toml=toml,
                   files={"steps/one/instruction.md": "Do step one."} if "[[steps]]" in toml else None)
        bench = HarborBenchmark(path=str(root))
        (spec,) = bench.load_tasks(RunRequest(benchmark="harbor", harness="nop", model="mock"))
        unsupported = spec.metadata["harbor"]["unsupported"]
        assert any(words in u for u in unsupported), (field, unsupported)


def test_fields_refused_at_the_start_stop_the_run(tmp_path: Path) -> None:
    for i, (field, (toml, words)) in enumerate(REFUSED_AT_START.items()):
        assert readme_rows()[field].startswith(("refused", "honoured for `linux`")), field
        root = tmp_path / f"t{i}"
        write_task(root, "task", instruction="Do it.", test=REWARD_BY_EXIT, toml=toml)
        with pytest.raises(UsageError, match=words):
            HarborBenchmark(path=str(root))


ENUMERATE = """
import json, typing
from pydantic import BaseModel
from harbor.models.task.config import TaskConfig

def model_of(annotation):
    todo = [annotation]
    while todo:
        a = todo.pop()
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
        todo += list(typing.get_args(a))
    return None

out = []
for name, field in TaskConfig.model_fields.items():
    sub = model_of(field.annotation)
    out += [name] if sub is None else [f"{name}.{child}" for child in sub.model_fields]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_field_list_is_harbors() -> None:
    python = HARBOR_VENV / "bin" / "python"
    if not python.exists():
        if os.environ.get("CI"):
            pytest.fail(f"no harbor test environment at {HARBOR_VENV} (tests/export/test_atif_export.py makes it)")
        pytest.skip(f"no harbor test environment at {HARBOR_VENV}")
    done = subprocess.run([str(python), "-c", ENUMERATE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == list(FIELDS)
