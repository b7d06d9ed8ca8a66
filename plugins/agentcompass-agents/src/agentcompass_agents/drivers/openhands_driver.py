"""``agentcompass-openhands``: OpenHands headless on one instruction, shipped into the ``openhands`` bundle.

It runs the OpenHands Software Agent SDK's default agent as the OpenHands CLI builds it
(``openhands.tools.preset.default.get_default_agent(llm, cli_mode=True)``: OpenHands' own system prompt, its
terminal, file-editor and task-tracker tools, its context condenser) in a local conversation on the task's
working directory, until the agent finishes, fails or reaches its iteration limit. The model is reached through
LiteLLM's OpenAI provider at ``LLM_BASE_URL`` with ``LLM_API_KEY`` (``LLM_MODEL``, default ``openai/agent``).
The conversation's events persist under ``--persistence-dir`` (OpenHands' own event files: the trajectory);
``result.json`` there says how it ended. Runs in the bundle's own Python; standard library only at import, so
``--help`` is cheap.

Exit status: 0 when the conversation finished, 1 when it ended in error or stuck (the reason on stderr), 2 for
bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

RESULT = "result.json"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentcompass-openhands", description=__doc__.splitlines()[0])
    parser.add_argument("--instruction-file", help="the task's instruction")
    parser.add_argument("--workspace", default=os.getcwd(), help="the directory the agent works in")
    parser.add_argument("--persistence-dir", help="where the conversation's events are written")
    parser.add_argument("--max-iterations", type=int, default=500, help="agent steps at most")
    parser.add_argument("--check", action="store_true",
                        help="build the agent and its tools, then exit (nothing is sent to the model)")
    return parser


def _agent() -> Any:
    from openhands.sdk import LLM
    from openhands.tools.preset.default import get_default_agent

    base_url = os.environ.get("LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or "http://127.0.0.1:9/v1"
    api_key = os.environ.get("LLM_API_KEY") or os.environ.get("OPENAI_API_KEY") or "unset"
    llm = LLM(model=os.environ.get("LLM_MODEL") or "openai/agent", base_url=base_url, api_key=api_key,
              usage_id="agent", num_retries=int(os.environ.get("LLM_NUM_RETRIES") or 2), retry_min_wait=1,
              retry_max_wait=8, input_cost_per_token=0.0, output_cost_per_token=0.0)
    return get_default_agent(llm=llm, cli_mode=True)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    agent = _agent()
    if args.check:
        print(f"agentcompass-openhands: the agent is ready ({', '.join(t.name for t in agent.tools)})")
        return 0
    if not args.instruction_file or not args.persistence_dir:
        print("agentcompass-openhands: --instruction-file and --persistence-dir are required", file=sys.stderr)
        return 2
    from openhands.sdk import Conversation
    from openhands.sdk.conversation.state import ConversationExecutionStatus

    instruction = Path(args.instruction_file).read_text(encoding="utf-8")
    persistence = Path(args.persistence_dir)
    persistence.mkdir(parents=True, exist_ok=True)
    conversation = Conversation(agent=agent, workspace=args.workspace, persistence_dir=str(persistence),
                                max_iteration_per_run=args.max_iterations, visualizer=None,
                                delete_on_close=False)
    conversation.send_message(instruction)
    error = ""
    try:
        conversation.run()
    except Exception as exc:  # the SDK raises for an LLM or tool failure it cannot recover from
        error = f"{type(exc).__name__}: {exc}"
    state = conversation.state
    status = str(getattr(state.execution_status, "value", state.execution_status))
    usage = conversation.conversation_stats.get_combined_metrics().accumulated_token_usage
    result = {
        "conversation_id": str(conversation.id),
        "status": status,
        "error": error or None,
        "prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
        "completion_tokens": getattr(usage, "completion_tokens", 0) or 0,
    }
    (persistence / RESULT).write_text(json.dumps(result, indent=2), encoding="utf-8")
    try:  # result.json is what the harness reads; stdout may be gone (seen once: EBADF after the agent's terminal)
        print(json.dumps({"agentcompass_openhands": result}), flush=True)
    except OSError:
        pass
    if error or state.execution_status != ConversationExecutionStatus.FINISHED:
        print(f"agentcompass-openhands: the conversation ended {status}"
              f"{': ' + error if error else ''}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
