"""Terminus 2's context summarisation (Harbor's ``_summarize``, ``_unwind_messages_to_free_tokens`` and the
fallbacks of ``_query_llm``), through the same model and the same prompts.

Three calls hand the work over when the conversation fills the context:

1. *summary* — the (unwound) history and :func:`~.prompts.summary_prompt`;
2. *questions* — a fresh conversation: :func:`~.prompts.question_prompt` (the task, the summary, the screen);
3. *answers* — the history, the summary exchange, and the questions.

The conversation becomes ``[first message, question prompt, questions]``, and the next prompt is
:func:`~.prompts.handoff_prompt` with the answers. When the provider refused a call as too long (rather than the
proactive check firing), a failed summary falls back to one short call, then to the task and the screen alone.
"""

from __future__ import annotations

from agentcompass.runtime import ModelError
from agentcompass.runtime.logs import get_logger

from agentcompass_harnesses.terminus2 import prompts
from agentcompass_harnesses.terminus2.chat import Chat, ContextOverflow, OutputTruncated, count_tokens
from agentcompass_harnesses.terminus2.tmux import TmuxSession

log = get_logger(plugin="harnesses")

#: What summarising may fail with and still let the agent go on (Harbor catches every ``Exception``).
FAILURES = (ModelError, ContextOverflow, OutputTruncated)


def unwind(chat: Chat, context_limit: int, target_free_tokens: int = 4000) -> None:
    """Drop the last (user, assistant) pairs until ``target_free_tokens`` are free; the first message stays."""
    while len(chat.messages) > 1:
        if context_limit - count_tokens(chat.messages) >= target_free_tokens:
            break
        if len(chat.messages) >= 2:
            chat.messages = chat.messages[:-2]
        else:
            break


async def summarize(chat: Chat, original_instruction: str, session: TmuxSession) -> str:
    """The three-call handoff; returns the prompt the agent goes on with."""
    if not chat.messages:
        return original_instruction
    summary_prompt = prompts.summary_prompt(original_instruction)
    summary = (await chat.call(summary_prompt, chat.messages)).content

    current_screen = await session.capture_pane(capture_entire=False)
    question_prompt = prompts.question_prompt(original_instruction, summary, current_screen)
    questions = (await chat.call(question_prompt, [])).content

    answers_history = [*chat.messages, {"role": "user", "content": summary_prompt},
                       {"role": "assistant", "content": summary}]
    answers = (await chat.call(prompts.answer_request_prompt(questions), answers_history)).content

    chat.messages = [chat.messages[0], {"role": "user", "content": question_prompt},
                     {"role": "assistant", "content": questions}]
    return prompts.handoff_prompt(answers)


async def after_overflow(chat: Chat, original_instruction: str, session: TmuxSession, context_limit: int) -> str:
    """What the agent says next after the provider refused a call as too long (Harbor's fallbacks): the answer's
    text to the handoff prompt."""
    unwind(chat, context_limit)
    handoff: str | None = None
    try:
        handoff = await summarize(chat, original_instruction, session)
    except FAILURES as exc:
        log.info("terminus2.summary_failed", error=str(exc)[:300])
    if handoff is None:
        try:
            screen = await session.capture_pane(capture_entire=False)
            limited = screen[-1000:] if screen else ""
            short = await chat.call(prompts.short_summary_prompt(original_instruction, limited))
            handoff = f"{original_instruction}\n\nSummary: {short.content}"
        except FAILURES as exc:
            log.info("terminus2.short_summary_failed", error=str(exc)[:300])
    if handoff is None:
        screen = await session.capture_pane(capture_entire=False)
        limited = screen[-1000:] if screen else ""
        handoff = f"{original_instruction}\n\nCurrent state: {limited}"
    try:
        return await chat.chat(handoff)
    except FAILURES as exc:
        log.info("terminus2.handoff_failed", error=str(exc)[:300])
        return "Technical difficulties. Please continue with the task."
