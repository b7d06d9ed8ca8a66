"""The tau2 runner: one conversation, or its evaluation, inside the task's environment. Standard library only.

    python3 -m taubench_runner run      --request REQUEST.json --output TRAJECTORY.json
    python3 -m taubench_runner oracle   --request REQUEST.json --output TRAJECTORY.json
    python3 -m taubench_runner evaluate --request REQUEST.json --trajectory TRAJECTORY.json --output EVAL.json

(``--stdout`` prints the output JSON as well, which saves the caller reading the file back.)

``run`` plays the conversation with the agent and the user simulator reached over OpenAI chat completions
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``; the request names each role's model, which the run's gateway routes
by role name). ``oracle`` plays the task's reference solution (gold actions) with no model. ``evaluate``
scores a trajectory as tau2 does, calling the judge model for NL assertions when the request asks for it.

The request::

    {"domain": "retail", "task": {...}, "data_dir": "DIR", "guidelines_dir": "DIR", "trusted_db": bool,
     "policy": null | "workflow",
     "max_steps": 200, "max_errors": 10, "enforce_communication_protocol": false,
     "agent": {"model": "agent", "params": {...}}, "user": {"model": "user", "params": {...}},
     "judge": {"model": "judge", "params": {...}} | null, "skip_nl": null | "why", "request_timeout": 600}

Exit status: 0 done; 2 a bad request; 3 a model call failed; 4 a model broke the protocol (tau2 fails such a
simulation); 5 an input file is missing. On 3 and 4 the output still holds the conversation so far and the
error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from taubench_runner import tasks as task_fields
from taubench_runner.domains import DOMAINS, DomainData
from taubench_runner.evaluator import EvaluationError, evaluate
from taubench_runner.llm import ChatClient, ModelCallError, ProtocolError
from taubench_runner.orchestrator import (
    DEFAULT_MAX_ERRORS,
    DEFAULT_MAX_STEPS,
    LLMAgent,
    LLMUser,
    OracleAgent,
    OraclePlan,
    OracleUser,
    Orchestrator,
)

EXIT_BAD_REQUEST = 2
EXIT_MODEL_ERROR = 3
EXIT_PROTOCOL_ERROR = 4
EXIT_MISSING_INPUT = 5
SCHEMA = 1
GUIDELINES = {False: "simulation_guidelines.md", True: "simulation_guidelines_tools.md"}


class RequestError(Exception):
    pass


class MissingInput(Exception):
    pass


def load_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise MissingInput(f"no {what} at {path}") from None
    except (OSError, ValueError) as exc:
        raise RequestError(f"cannot read the {what} {path}: {exc}") from None


def load_request(path: str) -> dict[str, Any]:
    request = load_json(path, "request")
    if not isinstance(request, dict):
        raise RequestError(f"the request {path} must hold a JSON object")
    if request.get("domain") not in DOMAINS:
        raise RequestError(f"the request's domain must be one of {', '.join(DOMAINS)}, got {request.get('domain')!r}")
    try:
        task_fields.check_task(request.get("task"))
    except task_fields.TaskError as exc:
        raise RequestError(str(exc)) from None
    for key, default in (("max_steps", DEFAULT_MAX_STEPS), ("max_errors", DEFAULT_MAX_ERRORS)):
        value = request.setdefault(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RequestError(f"the request's {key} must be a positive integer, got {value!r}")
    if not isinstance(request.get("data_dir"), str):
        raise RequestError("the request needs 'data_dir', the domain's data directory")
    return request


def domain_data(request: Mapping[str, Any]) -> DomainData:
    directory = request["data_dir"]
    if not os.path.isdir(directory):
        raise MissingInput(f"no domain data directory at {directory}")
    try:
        return DomainData.load(request["domain"], directory, trusted=bool(request.get("trusted_db")),
                               policy_variant=request.get("policy"))
    except FileNotFoundError as exc:
        raise MissingInput(f"a domain data file is missing: {exc.filename}") from None
    except ValueError as exc:  # an unknown policy variant
        raise RequestError(str(exc)) from None


def guidelines(request: Mapping[str, Any], with_tools: bool) -> str:
    path = os.path.join(request.get("guidelines_dir") or "", GUIDELINES[with_tools])
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise MissingInput(f"no user simulation guidelines at {path}") from None


def client_for(request: Mapping[str, Any]) -> ChatClient:
    base_url = request.get("base_url") or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
    if not base_url:
        raise RequestError("no model endpoint: set OPENAI_BASE_URL (or 'base_url' in the request)")
    return ChatClient(base_url, os.environ.get("OPENAI_API_KEY", ""),
                      timeout=float(request.get("request_timeout") or 600.0))


def _role(request: Mapping[str, Any], name: str) -> tuple[str, dict[str, Any]]:
    spec = request.get(name) or {}
    return str(spec.get("model") or name), dict(spec.get("params") or {})


def build(request: Mapping[str, Any], mode: str, data: DomainData) -> tuple[Orchestrator, ChatClient | None]:
    task = request["task"]
    environment = data.environment()
    client: ChatClient | None = None
    if mode == "oracle":
        plan = OraclePlan(task)
        agent: Any = OracleAgent(plan)
        user: Any = OracleUser(plan)
    else:
        client = client_for(request)
        model, params = _role(request, "agent")
        agent = LLMAgent(client, model, environment.policy, [t.openai_schema() for t in environment.get_tools()],
                         params)
        try:
            user_tools = environment.get_user_tools(include=task.get("user_tools")) or None
        except ValueError as exc:
            raise RequestError(f"task {task['id']!r}: {exc}") from None
        model, params = _role(request, "user")
        user = LLMUser(client, model, guidelines(request, user_tools is not None), task_fields.scenario_text(task),
                       [t.openai_schema() for t in user_tools] if user_tools else None, params)
    orchestrator = Orchestrator(
        environment, task, agent, user, max_steps=request["max_steps"], max_errors=request["max_errors"],
        validate_communication=bool(request.get("enforce_communication_protocol")),
    )
    return orchestrator, client


def converse(request: Mapping[str, Any], mode: str) -> tuple[dict[str, Any], int]:
    """Play one conversation; the output and the exit status."""
    cpu0, t0 = time.process_time(), time.perf_counter()
    data = domain_data(request)
    orchestrator, client = build(request, mode, data)
    load_cpu = time.process_time() - cpu0
    task = request["task"]
    out: dict[str, Any] = {"schema": SCHEMA, "task_id": task["id"], "domain": request["domain"], "mode": mode}
    status = 0
    try:
        out.update(orchestrator.run())
    except (ModelCallError, ProtocolError) as exc:
        status = EXIT_MODEL_ERROR if isinstance(exc, ModelCallError) else EXIT_PROTOCOL_ERROR
        # tau2 records a simulation that failed this way (after its retries) as an infrastructure error
        out.update(termination_reason="infrastructure_error", messages=orchestrator.trajectory,
                   steps=orchestrator.step_count, num_errors=orchestrator.num_errors, error=str(exc))
    agent_texts = [m["content"] for m in out["messages"] if m.get("role") == "assistant" and m.get("content")]
    out["final_answer"] = agent_texts[-1] if agent_texts else None
    out["model_calls"] = dict(client.calls) if client is not None else {}
    out["runner"] = {
        "cpu_seconds": round(time.process_time() - cpu0, 6),
        "load_cpu_seconds": round(load_cpu, 6),
        "conversation_cpu_seconds": round(orchestrator.cpu_seconds, 6),
        "wall_seconds": round(time.perf_counter() - t0, 6),
    }
    return out, status


def score(request: Mapping[str, Any], trajectory_path: str) -> dict[str, Any]:
    cpu0, t0 = time.process_time(), time.perf_counter()
    trajectory = load_json(trajectory_path, "trajectory")
    if not isinstance(trajectory, dict) or not isinstance(trajectory.get("messages"), list):
        raise RequestError(f"the trajectory {trajectory_path} has no 'messages' list")
    data = domain_data(request)
    judge = None
    if request.get("judge") and not request.get("skip_nl"):
        client = client_for(request)
        model, params = _role(request, "judge")

        def judge(messages: list[dict[str, Any]]) -> str:
            reply = client.complete(model, messages, None, **params)
            return reply.get("content") or ""

    result = evaluate(request["task"], trajectory, data, judge=judge, skip_nl=request.get("skip_nl"))
    result["schema"] = SCHEMA
    result["termination_reason"] = trajectory.get("termination_reason")
    result["evaluator"] = {"cpu_seconds": round(time.process_time() - cpu0, 6),
                           "wall_seconds": round(time.perf_counter() - t0, 6)}
    return result


def write_json(path: str, payload: Any) -> str:
    """Write ``payload`` atomically; the text written."""
    text = json.dumps(payload, ensure_ascii=False)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return text


def fail(code: int, message: str) -> int:
    print(f"taubench_runner: {message}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m taubench_runner", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "oracle", "evaluate"):
        p = sub.add_parser(name)
        p.add_argument("--request", required=True)
        p.add_argument("--output", required=True)
        if name == "evaluate":
            p.add_argument("--trajectory", required=True)
        p.add_argument("--stdout", action="store_true", help="also print the output JSON on stdout")
    args = parser.parse_args(argv)
    for stale in (args.output, args.output + ".tmp"):  # a stale output must never pass for this one
        try:
            os.remove(stale)
        except FileNotFoundError:
            pass
    try:
        request = load_request(args.request)
        if args.command == "evaluate":
            out, status = score(request, args.trajectory), 0
        else:
            out, status = converse(request, args.command)
        text = write_json(args.output, out)
        if args.stdout:
            sys.stdout.write(text)
            sys.stdout.flush()
    except MissingInput as exc:
        return fail(EXIT_MISSING_INPUT, str(exc))
    except RequestError as exc:
        return fail(EXIT_BAD_REQUEST, str(exc))
    except ModelCallError as exc:
        return fail(EXIT_MODEL_ERROR, f"the judge model call failed: {exc}")
    except EvaluationError as exc:
        return fail(1, f"evaluation failed: {exc}")
    if status == EXIT_MODEL_ERROR:
        return fail(status, f"a model call failed: {out['error']}")
    if status == EXIT_PROTOCOL_ERROR:
        return fail(status, f"{out['error']} (tau2 fails such a simulation)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
