"""The vendor protocol codecs, for model-provider plugins: the public face of the engine's codecs.

``CODECS[name]`` is the :class:`Codec` of ``"chat"`` (OpenAI chat completions), ``"anthropic"`` (Anthropic
Messages), ``"responses"`` (OpenAI Responses) and ``"gemini"`` (the Gemini API). Each translates a request in
its protocol to and from one canonical form (:class:`CanonicalRequest`: chat-completions messages and tools),
and an answer or a stream to and from :class:`~agentcompass.runtime.models.ChatResponse` and
:data:`~agentcompass.runtime.model_stream.StreamEvent`; a body that is not valid in its protocol raises
:class:`ProtocolError`. A provider that speaks a vendor's own API uses them to read its answers and streams
(:class:`SSEParser` splits a server-sent-events byte stream into events), and the wire helpers for what every
provider needs: :func:`wire_messages` / :func:`wire_tools` (canonical messages and tools as a chat-completions
server takes them), :func:`arguments_object` (a tool call's arguments as an object), :func:`split_data_url`.

::

    from agentcompass.runtime.codecs import CODECS, SSEParser

    decoder, parser = CODECS["anthropic"].decoder(model), SSEParser()
    for name, data in parser.feed(chunk):          # bytes as they arrive
        events = decoder.feed(name, data)          # StreamEvent pieces
    end = decoder.end().response                   # the whole answer

The codecs themselves live in the engine (``agentcompass.protocols``, which the gateway serves); this module
only hands on the part of them that is public, under the import path plugins use.
"""

from agentcompass.protocols import CODECS, CanonicalRequest, Codec, ProtocolError
from agentcompass.protocols.chat import wire_messages, wire_tools
from agentcompass.protocols.shared import arguments_object, split_data_url
from agentcompass.protocols.sse import SSEParser

__all__ = ["CODECS", "CanonicalRequest", "Codec", "ProtocolError", "SSEParser", "arguments_object",
           "split_data_url", "wire_messages", "wire_tools"]
