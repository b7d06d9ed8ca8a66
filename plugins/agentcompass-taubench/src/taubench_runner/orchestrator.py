"""tau2's half-duplex orchestrator: agent, user and environment take turns passing one message.

A *step* is one message sent: the agent's or the user's message, or the environment's answer to their tool
calls (all results of one message). ``max_steps`` and ``max_errors`` are checked after every step, except while
the environment has yet to answer; the first message (the agent's greeting) and a task's message history
are not steps. Termination reasons are tau2's: ``user_stop``, ``agent_stop``, ``max_steps``,
``too_many_errors``, ``agent_error``, ``user_error``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from taubench_runner import tasks as task_fields
from taubench_runner.environment import Environment, Message, has_text, is_tool_call
from taubench_runner.llm import ChatClient, ProtocolError
from taubench_runner.prompts import (
    FIRST_AGENT_MESSAGE,
    OUT_OF_SCOPE,
    STOP,
    TRANSFER,
    agent_system_prompt,
    user_system_prompt,
)

AGENT, USER, ENV = "agent", "user", "env"
DEFAULT_MAX_STEPS = 200
DEFAULT_MAX_ERRORS = 10


def now() -> str:
    return datetime.now().isoformat()


def user_is_stop(message: Mapping[str, Any]) -> bool:
    """tau2's ``UserSimulator.is_stop``: a text message holding one of the stop tokens."""
    if is_tool_call(message) or message.get("content") is None:
        return False
    content = message["content"]
    return STOP in content or TRANSFER in content or OUT_OF_SCOPE in content


def valid_agent_history(message: Mapping[str, Any]) -> bool:
    role = message.get("role")
    return role == "assistant" or (role == "user" and not is_tool_call(message)) or (
        role == "tool" and message.get("requestor") == "assistant")


def valid_user_history(message: Mapping[str, Any]) -> bool:
    role = message.get("role")
    return role == "user" or (role == "assistant" and not is_tool_call(message)) or (
        role == "tool" and message.get("requestor") == "user")


def check_message(message: Mapping[str, Any], who: str) -> None:
    """tau2's ``validate()``: a message needs text or tool calls (else the simulation fails)."""
    if not (has_text(message) or is_tool_call(message)):
        raise ProtocolError(f"the {who} sent an empty message (no text, no tool call)")


def _incoming(message: Message | list[Message]) -> list[Message]:
    return list(message) if isinstance(message, list) else [message]


# -- participants ----------------------------------------------------------------------------------


class LLMAgent:
    """tau2's ``LLMAgent``: the policy in the system prompt, the domain's tools, every message it has seen."""

    def __init__(self, client: ChatClient, model: str, policy: str, tools: Sequence[Mapping[str, Any]],
                 params: Mapping[str, Any]) -> None:
        self.client, self.model, self.tools, self.params = client, model, list(tools), dict(params)
        self.system = {"role": "system", "content": agent_system_prompt(policy)}
        self.messages: list[Message] = []

    def init_state(self, history: Sequence[Message]) -> None:
        self.messages = list(history)

    def next(self, incoming: Message | list[Message]) -> Message:
        self.messages.extend(_incoming(incoming))
        reply = self.client.complete(self.model, [self.system, *self.messages], self.tools, **self.params)
        for call in reply["tool_calls"] or ():
            call["requestor"] = "assistant"
        self.messages.append(reply)
        return reply


class LLMUser:
    """tau2's ``UserSimulator``: the guidelines and the scenario in the system prompt; it sees the conversation
    from its side (its own messages as the assistant's, the agent's text as the user's) and never the agent's
    tool calls; the user's tools, when the domain has some, are offered to it as ordinary tools."""

    def __init__(self, client: ChatClient, model: str, guidelines: str, scenario: str,
                 tools: Sequence[Mapping[str, Any]] | None, params: Mapping[str, Any]) -> None:
        self.client, self.model, self.params = client, model, dict(params)
        self.tools = list(tools) if tools else None
        self.system = {"role": "system", "content": user_system_prompt(guidelines, scenario)}
        self.messages: list[Message] = []

    def init_state(self, history: Sequence[Message]) -> None:
        self.messages = list(history)

    def flipped(self) -> list[Message]:
        out: list[Message] = []
        for m in self.messages:
            if m["role"] == "user":
                out.append({"role": "assistant", "content": m.get("content"), "tool_calls": m.get("tool_calls")})
            elif m["role"] == "assistant":
                if is_tool_call(m):
                    raise ValueError(f"Tool calls are not supported in the flipped messages: {m}")
                out.append({"role": "user", "content": m.get("content")})
            elif m["role"] == "tool":
                if m.get("requestor") != "user":
                    raise ValueError(f"Tool messages should be sent to the user in this message history: {m}")
                out.append({"role": "tool", "id": m.get("id"), "content": m.get("content")})
        return out

    def next(self, incoming: Message | list[Message]) -> Message:
        for m in _incoming(incoming):
            if m["role"] == "tool" or has_text(m) or is_tool_call(m):
                self.messages.append(m)
        reply = self.client.complete(self.model, [self.system, *self.flipped()], self.tools, **self.params)
        message: Message = {**reply, "role": "user"}
        if reply["tool_calls"] is not None:
            message["tool_calls"] = [{**c, "requestor": "user"} for c in reply["tool_calls"]]
        self.messages.append(message)
        return message


class OraclePlan:
    """The reference solution: the gold actions in order (each by its requestor), then the agent tells the
    user what the task expects to be communicated, and the user stops."""

    def __init__(self, task: Mapping[str, Any]) -> None:
        self.actions = task_fields.gold_actions(task)
        self.position = 0
        self.communicate = list((task_fields.criteria(task) or {}).get("communicate_info") or ())
        self.concluded = False

    def next_action(self) -> dict[str, Any] | None:
        return self.actions[self.position] if self.position < len(self.actions) else None


class OracleAgent:
    """The agent's side of the reference solution (no model)."""

    def __init__(self, plan: OraclePlan) -> None:
        self.plan = plan

    def init_state(self, history: Sequence[Message]) -> None:
        pass

    def next(self, incoming: Message | list[Message]) -> Message:
        action = self.plan.next_action()
        if action is not None and action["requestor"] == "assistant":
            self.plan.position += 1
            call = {"id": f"oracle_{self.plan.position}", "name": action["name"],
                    "arguments": dict(action["arguments"]), "requestor": "assistant"}
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        if action is not None:  # the user's turn to act
            return {"role": "assistant", "content": f"Please do this on your side: {action['name']}.",
                    "tool_calls": None}
        self.plan.concluded = True
        lines = ["That is everything; your request is complete."]
        if self.plan.communicate:
            lines.append("Here is what you need to know:")
            lines.extend(f"- {info}" for info in self.plan.communicate)
        return {"role": "assistant", "content": "\n".join(lines), "tool_calls": None}


class OracleUser:
    """The user's side of the reference solution (no model): their gold actions when it is their turn, then
    ``###STOP###`` once the agent has concluded."""

    def __init__(self, plan: OraclePlan) -> None:
        self.plan = plan
        self.greeted = False

    def init_state(self, history: Sequence[Message]) -> None:
        pass

    def next(self, incoming: Message | list[Message]) -> Message:
        if self.plan.concluded:
            return {"role": "user", "content": STOP, "tool_calls": None}
        action = self.plan.next_action()
        if action is not None and action["requestor"] == "user" and self.greeted:
            last = _incoming(incoming)[-1]
            if last["role"] != "tool":
                self.plan.position += 1
                call = {"id": f"oracle_{self.plan.position}", "name": action["name"],
                        "arguments": dict(action["arguments"]), "requestor": "user"}
                return {"role": "user", "content": None, "tool_calls": [call]}
            return {"role": "user", "content": "Done.", "tool_calls": None}
        first = not self.greeted
        self.greeted = True
        return {"role": "user", "content": "Hi, I need help with my request." if first else "Done.",
                "tool_calls": None}


# -- the orchestrator ------------------------------------------------------------------------------


class Orchestrator:
    def __init__(
        self,
        environment: Environment,
        task: Mapping[str, Any],
        agent: Any,
        user: Any,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        max_errors: int = DEFAULT_MAX_ERRORS,
        validate_communication: bool = False,
    ) -> None:
        self.environment, self.task, self.agent, self.user = environment, task, agent, user
        self.max_steps, self.max_errors = max_steps, max_errors
        self.validate_communication = validate_communication
        self.trajectory: list[Message] = []
        self.from_role: str | None = None
        self.to_role: str | None = None
        self.message: Message | list[Message] | None = None
        self.step_count = 0
        self.num_errors = 0
        self.done = False
        self.termination_reason: str | None = None
        self.cpu_seconds = 0.0

    def _stamp(self, message: Message) -> Message:
        message.setdefault("timestamp", now())
        return message

    def initialize(self) -> None:
        state = task_fields.initial_state(self.task)
        history = [self._stamp(m) for m in task_fields.message_history(self.task)]
        self.environment.set_state(state.get("initialization_data"), state.get("initialization_actions"), history)
        if history:
            validate_message_history(history)
            last = history[-1]
            if last["role"] == "assistant":
                self.from_role = AGENT
                self.to_role = ENV if is_tool_call(last) else USER
                self.agent.init_state([m for m in history if valid_agent_history(m)])
                self.user.init_state([m for m in history[:-1] if valid_user_history(m)])
                self.message = last
            elif last["role"] == "user":
                self.from_role = USER
                self.to_role = ENV if is_tool_call(last) else AGENT
                self.user.init_state([m for m in history if valid_user_history(m)])
                self.agent.init_state([m for m in history[:-1] if valid_agent_history(m)])
                self.message = last
                if user_is_stop(last):
                    self.done, self.termination_reason = True, "user_stop"
            else:
                self.from_role = ENV
                if last.get("requestor") == "assistant":
                    self.to_role = AGENT
                    self.agent.init_state([m for m in history[:-1] if valid_agent_history(m)])
                    self.user.init_state([m for m in history if valid_user_history(m)])
                else:
                    self.to_role = USER
                    self.agent.init_state([m for m in history if valid_agent_history(m)])
                    self.user.init_state([m for m in history[:-1] if valid_user_history(m)])
                self.message = last
            self.trajectory = history
        else:
            first = self._stamp({"role": "assistant", "content": FIRST_AGENT_MESSAGE, "tool_calls": None,
                                 "cost": 0.0})
            self.user.init_state([])
            self.agent.init_state([first])
            self.trajectory = [first]
            self.message = first
            self.from_role, self.to_role = AGENT, USER
        if self.validate_communication:
            self._check_communication()
        self.environment.sync_tools()

    def step(self) -> None:
        if self.from_role in (AGENT, ENV) and self.to_role == USER:
            assert self.message is not None
            message = self._stamp(self.user.next(self.message))
            check_message(message, "user simulator")
            if user_is_stop(message):
                self.done, self.termination_reason = True, "user_stop"
            self.trajectory.append(message)
            self.message, self.from_role = message, USER
            self.to_role = ENV if is_tool_call(message) else AGENT
        elif self.from_role in (USER, ENV) and self.to_role == AGENT:
            assert self.message is not None
            message = self._stamp(self.agent.next(self.message))
            check_message(message, "agent")
            self.trajectory.append(message)
            self.message, self.from_role = message, AGENT
            self.to_role = ENV if is_tool_call(message) else USER
        elif self.from_role in (AGENT, USER) and self.to_role == ENV:
            assert isinstance(self.message, dict) and is_tool_call(self.message)
            results = []
            for call in self.message["tool_calls"]:
                started = time.perf_counter()
                result = self.environment.get_response(call)
                result["duration_seconds"] = round(time.perf_counter() - started, 6)
                if result["error"]:
                    self.num_errors += 1
                results.append(self._stamp(result))
            self.trajectory.extend(results)
            self.message = results if len(results) > 1 else results[0]
            self.to_role, self.from_role = self.from_role, ENV
        else:
            raise ValueError(f"Invalid role combination. From role: {self.from_role}, To role: {self.to_role}")
        if self.validate_communication:
            self._check_communication()
        self.step_count += 1
        self.environment.sync_tools()

    def _check_communication(self) -> None:
        if self.from_role not in (AGENT, USER) or not isinstance(self.message, dict):
            return
        if is_tool_call(self.message) and has_text(self.message):
            self.done = True
            self.termination_reason = "agent_error" if self.from_role == AGENT else "user_error"

    def _check_termination(self) -> None:
        if self.to_role == ENV:
            return
        if self.step_count >= self.max_steps:
            self.done, self.termination_reason = True, "max_steps"
        if self.num_errors >= self.max_errors:
            self.done, self.termination_reason = True, "too_many_errors"

    def run(self) -> dict[str, Any]:
        """Run to the end; the trajectory (turn_idx set), the termination reason and the counters."""
        started, cpu_started = time.perf_counter(), time.process_time()
        self.initialize()
        while not self.done:
            self.step()
            self._check_termination()
        if self.to_role == ENV and self.termination_reason not in ("agent_error", "user_error"):
            raise ValueError(f"Environment should not receive the last message. Last message: {self.message}")
        self.cpu_seconds = time.process_time() - cpu_started
        for i, message in enumerate(self.trajectory):
            message["turn_idx"] = i
        return {
            "termination_reason": self.termination_reason,
            "messages": self.trajectory,
            "steps": self.step_count,
            "num_errors": self.num_errors,
            "duration_seconds": round(time.perf_counter() - started, 6),
        }


def validate_message_history(history: Sequence[Message]) -> None:
    """tau2's check of a task's message history: every tool call answered, by the right requestor."""
    expected = 0
    requestor = None
    for message in history:
        if message["role"] in ("assistant", "user"):
            check_message(message, message["role"])
            if is_tool_call(message):
                if expected > 0:
                    raise ValueError(f"{expected} tool messages are missing. Got {message['role']} message.")
                expected = len(message["tool_calls"])
                requestor = message["role"]
            else:
                requestor = None
        elif message["role"] == "tool":
            if expected == 0 or requestor is None:
                raise ValueError("No tool messages expected.")
            if requestor != message.get("requestor"):
                raise ValueError(f"Got tool message from {message.get('requestor')}, expected {requestor}.")
            expected -= 1
