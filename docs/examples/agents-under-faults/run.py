"""Agents under faults: ``react`` (the bundled tool-calling loop) and ``sdk_agent.py`` (a one-shot agent on the
OpenAI SDK, under the ``command`` harness) on ``example_coding``, each clean and under three fault profiles —
one suite, one leaderboard with its robustness table.

The model is scripted (no key, no network): a loopback OpenAI-compatible server that solves every task — with
tools (``react``) it writes the reference solution, checks it imports and submits; without (``sdk_agent.py``)
it answers with the solution's text. So the clean cells score 1 and whatever the faulted ones lose, the faults
cost. From the repository's root::

    uv run python docs/examples/agents-under-faults/run.py runs/under-faults
    uv run agentcompass suite show runs/under-faults
"""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

from agentcompass.testing import LoopbackOpenAI  # noqa: E402

from tests.harnesses.support import answers_with_the_reference, solver  # noqa: E402

PROFILES = ("none", "flaky-api", "cut-streams", "bad-tool-json")
AGENTS = {"react": ("react", None), "sdk-agent": ("command", f"python3 {HERE / 'sdk_agent.py'} {{instruction_file}}")}


def answer(request: dict) -> dict:
    return solver(request) if request.get("tools") else answers_with_the_reference(request)


def suite(base_url: str) -> str:
    cells = []
    for agent, (harness, command) in AGENTS.items():
        for profile in PROFILES:
            args = f'\nharness_args = {{ command = "{command}" }}' if command else ""
            cells.append(f'[[run]]\nname = "{agent}-{profile}"\nharness = "{harness}"\nfaults = "{profile}"{args}\n')
    defaults = {"benchmark": '"example_coding"', "model": '"openai-compatible/scripted"',
                "model_base_url": f'"{base_url}"', "trials": "3", "seed": "38", "concurrency": "4"}
    head = "\n".join(f"{key} = {value}" for key, value in defaults.items())
    return f'baseline = "react-none"\n\n[defaults]\n{head}\n\n' + "\n".join(cells)


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/under-faults")
    out.parent.mkdir(parents=True, exist_ok=True)
    with LoopbackOpenAI(answer, api_key=None) as server:
        path = out.parent / f"{out.name}.toml"
        path.write_text(suite(server.base_url))
        sys.exit(subprocess.call([sys.executable, "-m", "agentcompass.cli.main", "suite", "run", str(path), "-o",
                                  str(out)]))
