"""Streamed model answers and native requests: what :class:`~agentcompass.runtime.models.ModelClient` grew
so that the run's gateway can stream, and pass a request through unchanged, in every protocol.

A streamed answer is a sequence of :data:`StreamEvent`: :class:`TextDelta`, :class:`ReasoningDelta` and
:class:`ToolCallDelta` pieces in the order the model produced them, then exactly one :class:`StreamEnd`
carrying the whole answer (the assembled message, the usage, the finish reason). :class:`StreamAssembler`
builds that whole answer from the pieces, for a provider that streams natively; :func:`events_of` cuts a
whole answer into pieces, for one that does not (the default ``ModelClient.stream`` does that).

A native request (:class:`NativeRequest`) is a request body in a vendor protocol (``"anthropic"`` Messages,
``"responses"``, ``"chat"`` completions, ``"gemini"``) that a client listing the protocol in
``native_protocols`` sends to its provider as is, with only the model name and the credentials its own.
"""

from agentcompass.runtime.models import (
    NativeReply,
    NativeRequest,
    ReasoningDelta,
    StreamAssembler,
    StreamEnd,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    events_of,
)

__all__ = [
    "NativeReply", "NativeRequest", "ReasoningDelta", "StreamAssembler", "StreamEnd", "StreamEvent", "TextDelta",
    "ToolCallDelta", "events_of",
]
