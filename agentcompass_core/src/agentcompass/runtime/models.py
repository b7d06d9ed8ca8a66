"""The model client interface: one async chat call in OpenAI's message format.

Providers (registered with ``register_models``) return a :class:`ModelClient`; the runtime wraps it to meter
every call into the task's trajectory and serves it to environments through the model gateway.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Token counts of one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ChatResponse:
    """One chat completion.

    :param message: the assistant message, OpenAI-style: ``{"role": "assistant", "content": ...,
        "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]}``.
    """

    message: Mapping[str, Any]
    model: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    #: Provider facts about the call for the trajectory (e.g. ``{"attempts": 2}``); never a secret.
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def content(self) -> str:
        return str(self.message.get("content") or "")

    @property
    def tool_calls(self) -> list[Mapping[str, Any]]:
        return list(self.message.get("tool_calls") or [])


class ModelError(Exception):
    """A model call failed.

    :param retryable: a later identical call may succeed (rate limit, server error, timeout).
    :param status: the HTTP status of the provider's answer, when there was one.
    :param fatal: every later call will fail the same way (bad credentials, unknown model), so the run
        stops scheduling tasks instead of failing them one by one.
    """

    def __init__(
        self, message: str, *, retryable: bool = False, status: int | None = None, fatal: bool = False
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.fatal = fatal


class ModelClient(abc.ABC):
    """An async chat client for one model.

    Providers register a factory with ``register_models``; for ``MODEL`` = ``provider/name`` the runtime calls
    ``factory(name, settings=settings, **options)``: ``settings`` is the run's
    :class:`~agentcompass.runtime.providers.ProviderSettings` (base URL, the *name* of the key's variable,
    retries, connections, timeout), ``options`` the ``--model-arg`` values as strings (the agent role only).
    Reject an option you do not know with :class:`~agentcompass.errors.UsageError`.
    """

    #: The model's name as the provider knows it.
    model: str = ""
    #: Values to mask in everything the run writes and prints (the provider's API key, ...). The runtime reads
    #: it once, when the client is built.
    secrets: tuple[str, ...] = ()
    #: The model takes a ``seed`` generation setting: the runtime passes each (task, trial)'s seed unless the
    #: caller gives one.
    accepts_seed: bool = False

    @abc.abstractmethod
    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        """Send a conversation and return the assistant's next message.

        :param messages: OpenAI-style messages (system, user, assistant, tool).
        :param tools: OpenAI-style function tool schemas the model may call.
        :param params: generation settings (temperature, max_tokens, seed, ...).
        :raises ModelError: the call failed.
        """

    async def aclose(self) -> None:  # noqa: B027
        """Release connections."""
