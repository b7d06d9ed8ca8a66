"""The vendor protocols the run's gateway speaks, each translated to and from one canonical form.

``CODECS[name]`` is the :class:`~agentcompass.protocols.base.Codec` of ``"chat"`` (OpenAI chat
completions), ``"anthropic"`` (Anthropic Messages), ``"responses"`` (OpenAI Responses) and ``"gemini"`` (the
Gemini API). The canonical form is described in :mod:`agentcompass.protocols.base`; what each direction keeps
and drops is the table in the README ("Any agent, any model").
"""

from __future__ import annotations

from agentcompass.protocols.anthropic import AnthropicCodec
from agentcompass.protocols.base import CanonicalRequest, Codec, Decoder, Encoder, ProtocolError, UpstreamStreamError
from agentcompass.protocols.chat import ChatCodec
from agentcompass.protocols.gemini import GeminiCodec
from agentcompass.protocols.responses import ResponsesCodec

CODECS: dict[str, Codec] = {c.name: c for c in (ChatCodec(), AnthropicCodec(), ResponsesCodec(), GeminiCodec())}

__all__ = ["CODECS", "CanonicalRequest", "Codec", "Decoder", "Encoder", "ProtocolError", "UpstreamStreamError"]
