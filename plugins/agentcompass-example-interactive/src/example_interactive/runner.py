"""The upstream interaction runner of example_interactive: agent ⇄ domain ⇄ simulated user.

Standard library only: the benchmark copies this package into the task environment and runs::

    python3 -m example_interactive.runner run --request REQUEST.json --output RESULT.json
    python3 -m example_interactive.runner oracle --request REQUEST.json --output RESULT.json

``run`` drives the agent model through an OpenAI-compatible endpoint (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``AGENTCOMPASS_MODEL``; the request's ``base_url`` / ``model`` override them). ``oracle``
replays the task's golden actions instead of calling a model (a reference run).

The request: ``{"task_id": str, "task": {"initial_db", "user", "golden_actions", ...}, "max_turns": int,
"request_timeout": float, "model_params": {...}}``; ``task`` may be left out, the task is then read from the
packaged ``tasks.json``. The output: ``{"task_id", "final_answer", "messages", "final_db", "termination",
"turns", ...}``. A turn is one call of the agent model. Termination is ``"user_stop"``, ``"transfer"`` or
``"max_turns"``.

Exit status: 0 on success, 2 for a bad request, 3 when the model endpoint failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from example_interactive import chat_client
from example_interactive.chat_client import ModelCallError
from example_interactive.domain import POLICY, TOOLS, TaskDomain, apply_patch, db_equal, replay
from example_interactive.user_sim import STOP, UserSimulator

DEFAULT_MAX_TURNS = 30
DEFAULT_REQUEST_TIMEOUT = 120.0
RETRY_DELAY_SECONDS = 1.0

EXIT_BAD_REQUEST = 2
EXIT_MODEL_ERROR = 3


class RequestError(Exception):
    """The request file is unusable."""


# -- tasks ---------------------------------------------------------------------------------------


def packaged_tasks() -> dict[str, Any]:
    """The ``tasks.json`` shipped beside this module."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tasks.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def resolve_task(raw: Mapping[str, Any], default_db: Mapping[str, Any]) -> dict[str, Any]:
    """A task of ``tasks.json`` made self-contained: ``initial_db`` is the default DB with the task's
    ``db_patch`` applied (or the task's own ``initial_db``)."""
    task = {k: v for k, v in raw.items() if k != "db_patch"}
    if "initial_db" not in task:
        task["initial_db"] = apply_patch(default_db, raw.get("db_patch"))
    return task


def load_request(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            request = json.load(fh)
    except (OSError, ValueError) as exc:
        raise RequestError(f"cannot read request file {path}: {exc}") from None
    if not isinstance(request, dict):
        raise RequestError(f"request file {path} must hold a JSON object")
    task = request.get("task")
    if task is None:
        task_id = request.get("task_id")
        doc = packaged_tasks()
        found = [t for t in doc["tasks"] if t.get("id") == task_id]
        if not found:
            raise RequestError(f"request names no task, or an unknown task_id {task_id!r}")
        task = resolve_task(found[0], doc["default_db"])
        request["task"] = task
    if not isinstance(task, dict) or not isinstance(task.get("initial_db"), dict):
        raise RequestError("request 'task' must be an object with an 'initial_db'")
    if not isinstance(task.get("user"), dict):
        raise RequestError("request 'task' must have a 'user' script")
    request.setdefault("task_id", task.get("id"))
    max_turns = request.get("max_turns", DEFAULT_MAX_TURNS)
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise RequestError(f"'max_turns' must be a positive integer, got {max_turns!r}")
    return request


# -- the agent model -----------------------------------------------------------------------------


class ChatClient:
    """The agent model: one endpoint, one model, the request's generation settings. ``chat_client`` (the core's
    :mod:`agentcompass.runtime.chat_client`, linked into this package) does the HTTP, with one retry on 5xx and
    connection errors."""

    def __init__(self, base_url: str, api_key: str, model: str, *, timeout: float, params: Mapping[str, Any]):
        self.endpoint = chat_client.ChatClient(base_url, api_key, timeout=timeout, retry_delay=RETRY_DELAY_SECONDS)
        self.model = model
        self.params = dict(params)

    def chat(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        body = dict(self.params)
        body.update({"model": self.model, "messages": list(messages), "tools": list(tools)})
        message = chat_client.first_message(self.endpoint.complete(body))
        if message is None:
            raise ModelCallError(f"model endpoint sent an invalid chat completion to POST {self.endpoint.url}: "
                                 "no choices[0].message")
        return message


def _assistant_message(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The assistant message as it enters the trajectory (and goes back to the model)."""
    message: dict[str, Any] = {"role": "assistant", "content": raw.get("content")}
    calls = []
    for i, call in enumerate(raw.get("tool_calls") or []):
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        calls.append(
            {
                "id": call.get("id") or f"call_{i}",
                "type": "function",
                "function": {"name": function.get("name") or "", "arguments": arguments},
            }
        )
    if calls:
        message["tool_calls"] = calls
    return message


# -- the interaction -----------------------------------------------------------------------------


def run_interaction(request: Mapping[str, Any], client: ChatClient) -> dict[str, Any]:
    """Run one task: the simulated user talks to the agent, the agent acts on the domain."""
    task = request["task"]
    domain = TaskDomain(task["initial_db"])
    golden = replay(task["initial_db"], task.get("golden_actions") or [])
    golden_db = golden.snapshot()
    expects_transfer = golden.transferred

    def goal_met() -> bool:
        return db_equal(domain.db, golden_db) and (domain.transferred or not expects_transfer)

    user = UserSimulator(task["user"], goal_met=goal_met)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": POLICY},
        {"role": "user", "content": user.first_message()},
    ]
    max_turns = int(request.get("max_turns", DEFAULT_MAX_TURNS))
    turns = 0
    final_answer: str | None = None
    termination = "max_turns"
    n_tool_calls = n_tool_errors = 0

    while turns < max_turns:
        turns += 1
        assistant = _assistant_message(client.chat(messages, TOOLS))
        messages.append(assistant)
        if assistant.get("content"):
            final_answer = assistant["content"]
        calls = assistant.get("tool_calls") or []
        if calls:
            for call in calls:
                result, is_error = domain.call(call["function"]["name"], call["function"]["arguments"])
                n_tool_calls += 1
                n_tool_errors += int(is_error)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            if domain.transferred:
                termination = "transfer"
                break
            continue
        reply = user.respond(assistant.get("content") or "")
        messages.append({"role": "user", "content": reply})
        if reply == STOP:
            termination = "user_stop"
            break

    return {
        "task_id": request.get("task_id"),
        "model": client.model,
        "final_answer": final_answer,
        "messages": messages,
        "final_db": domain.snapshot(),
        "termination": termination,
        "user_stop_reason": user.stop_reason,
        "transferred": domain.transferred,
        "turns": turns,
        "tool_calls": n_tool_calls,
        "tool_errors": n_tool_errors,
    }


def run_oracle(request: Mapping[str, Any]) -> dict[str, Any]:
    """The reference run: the golden actions, as tool calls, with no model."""
    task = request["task"]
    domain = TaskDomain(task["initial_db"])
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": POLICY},
        {"role": "user", "content": task["user"]["first_message"]},
    ]
    for i, action in enumerate(task.get("golden_actions") or []):
        arguments = json.dumps(action.get("arguments") or {}, sort_keys=True)
        call = {
            "id": f"oracle_{i}",
            "type": "function",
            "function": {"name": action["name"], "arguments": arguments},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        result, _ = domain.call(action["name"], arguments)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    final_answer = "Done."
    messages.append({"role": "assistant", "content": final_answer})
    return {
        "task_id": request.get("task_id"),
        "model": "oracle",
        "final_answer": final_answer,
        "messages": messages,
        "final_db": domain.snapshot(),
        "termination": "transfer" if domain.transferred else "oracle",
        "user_stop_reason": None,
        "transferred": domain.transferred,
        "turns": 0,
        "tool_calls": len(task.get("golden_actions") or []),
        "tool_errors": 0,
    }


def _write_json_atomically(path: str, payload: Any) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, ensure_ascii=False, indent=1)
    os.replace(tmp, path)


def _fail(code: int, message: str) -> int:
    print(f"example_interactive.runner: error: {message}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m example_interactive.runner", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("run", "run the task against the agent model"),
        ("oracle", "replay the golden actions"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--request", required=True, help="the request JSON file")
        p.add_argument("--output", required=True, help="where to write the result JSON")
    args = parser.parse_args(argv)

    # A stale result of an earlier attempt must never pass for this one.
    for stale in (args.output, args.output + ".tmp"):
        try:
            os.remove(stale)
        except FileNotFoundError:
            pass

    try:
        request = load_request(args.request)
    except RequestError as exc:
        return _fail(EXIT_BAD_REQUEST, str(exc))

    if args.command == "oracle":
        payload = run_oracle(request)
    else:
        base_url = request.get("base_url") or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
        api_key = os.environ.get("OPENAI_API_KEY", "")
        model = request.get("model") or os.environ.get("AGENTCOMPASS_MODEL") or os.environ.get("OPENAI_MODEL")
        if not base_url:
            return _fail(EXIT_BAD_REQUEST, "no model endpoint: set OPENAI_BASE_URL (or 'base_url' in the request)")
        if not model:
            return _fail(EXIT_BAD_REQUEST, "no model name: set AGENTCOMPASS_MODEL (or 'model' in the request)")
        params = request.get("model_params") or {}
        if not isinstance(params, dict):
            return _fail(EXIT_BAD_REQUEST, "'model_params' must be an object")
        client = ChatClient(
            base_url,
            api_key,
            model,
            timeout=float(request.get("request_timeout") or DEFAULT_REQUEST_TIMEOUT),
            params=params,
        )
        try:
            payload = run_interaction(request, client)
        except ModelCallError as exc:
            return _fail(EXIT_MODEL_ERROR, f"agent model call failed: {exc}")
    _write_json_atomically(args.output, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
