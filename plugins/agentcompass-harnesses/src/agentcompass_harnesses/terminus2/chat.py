"""Terminus 2's conversation with the model (Harbor's ``Chat`` and ``_query_llm``): each prompt is a user
message after the history; the answer joins the history only when the call succeeded. A call that fails is
tried 3 times in all (as Harbor's ``tenacity`` retry does); one the provider refuses as too long for the
context goes to :mod:`.summarize` instead; an answer cut at the output limit is answered with Harbor's
"ERROR!! NONE of the actions ..." prompt.

Token counts are estimated (:func:`count_tokens`, about 4 characters a token) where Harbor asks LiteLLM's
tokenizer; the context limit is the ``context_limit`` option (Harbor's fallback for a model LiteLLM does not
know, 1,000,000, unless set).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentcompass.runtime import ChatResponse, ModelError

from agentcompass_harnesses.context import is_overflow

#: Attempts of one call (Harbor's ``stop_after_attempt(3)``).
ATTEMPTS = 3

Message = dict[str, Any]


def count_tokens(messages: Sequence[Message]) -> int:
    """An estimate of the conversation's tokens: its characters / 4, plus a few per message."""
    return sum(len(str(m.get("content") or "")) // 4 + 4 for m in messages)


class ContextOverflow(Exception):
    """The provider refused the call because the conversation does not fit the model's context."""


class OutputTruncated(Exception):
    """The answer stopped at the output limit (``finish_reason == "length"``)."""

    def __init__(self, content: str) -> None:
        super().__init__("the answer was cut at the model's output limit")
        self.content = content


class Chat:
    """The main conversation, and single calls (the summarising subagents) through the same model."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.messages: list[Message] = []
        self.calls = 0
        self.retries = 0

    async def call(self, prompt: str, history: Sequence[Message] = ()) -> ChatResponse:
        """One model call with ``history`` and ``prompt`` as the last user message, tried up to
        :data:`ATTEMPTS` times; raises :class:`ContextOverflow`, :class:`OutputTruncated` or the last
        :class:`ModelError`."""
        messages = [*history, {"role": "user", "content": prompt}]
        for attempt in range(1, ATTEMPTS + 1):
            self.calls += 1
            try:
                response: ChatResponse = await self.model.chat(messages)
            except ModelError as exc:
                if is_overflow(exc):
                    raise ContextOverflow(str(exc)) from exc
                if attempt == ATTEMPTS or exc.fatal:
                    raise
                self.retries += 1
                continue
            if response.finish_reason == "length":
                raise OutputTruncated(response.content)
            return response
        raise AssertionError("unreachable")

    async def chat(self, prompt: str) -> str:
        """A turn of the main conversation: the answer's text, the prompt and answer added to the history."""
        response = await self.call(prompt, self.messages)
        self.messages.extend([{"role": "user", "content": prompt},
                              {"role": "assistant", "content": response.content}])
        return response.content
