"""Redaction of known secret values from anything agentcompass writes (results, logs, trajectories).

A registered secret is masked as ``***``:

* verbatim, and in the forms it takes when it is written or sent: JSON-escaped (``\\"``, ``\\\\``,
  ``\\uXXXX``), percent-encoded (``quote``, ``quote(safe="")``, ``quote_plus``, upper- or lower-case hex), and
  base64 (standard and URL-safe alphabets, padded or not) — of the secret alone, of ``Bearer SECRET``, and
  inside any other base64 text such as the ``user:SECRET`` of HTTP basic authentication (whatever comes
  before it, the part of the encoding that depends only on the secret is masked; at most the 4 characters of
  each edge group, which mix in neighbouring bytes, stay);
* in pieces: any run of at least :data:`MIN_FRAGMENT` characters that is the beginning or the end of one of
  those forms is masked too, so a secret cut short by whoever truncated a text (``sk-abc...``) does not leak
  what is left of it. Code that truncates should still mask first; this is the safety net.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import quote, quote_plus

import attrs

MASK = "***"
#: Values shorter than this are not treated as secrets (masking "a" everywhere would destroy output).
MIN_SECRET_LENGTH = 6
#: A beginning or end of a secret (or of an encoded form of it) at least this long is masked as well.
MIN_FRAGMENT = 8
#: What HTTP clients put in front of a key before base64-encoding it (bearer and basic authentication).
_B64_PREFIXES = ("", "Bearer ", ":")
_HEX_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def secret_forms(value: str) -> tuple[set[str], set[str]]:
    """The texts to mask for ``value``: (forms masked whole and in pieces, forms masked whole only)."""
    pieces = {value}
    whole: set[str] = set()
    for ascii_only in (False, True):
        once = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        # JSON text inside a JSON string (a tool result holding JSON) escapes twice.
        pieces.update((once, json.dumps(once, ensure_ascii=ascii_only)[1:-1]))
    for encoded in (quote(value, safe=""), quote(value), quote_plus(value)):
        pieces.add(encoded)
        pieces.add(_HEX_ESCAPE.sub(lambda m: m.group(0).lower(), encoded))
    raw = value.encode("utf-8")
    # Inside any base64 text, the secret's bytes fall on one of three alignments; for each, the groups made of
    # the secret's bytes alone encode the same way whatever surrounds them.
    for skip in range(3):
        groups = (len(raw) - skip) // 3
        if groups * 4 >= MIN_FRAGMENT:
            core = base64.b64encode(raw[skip:skip + 3 * groups]).decode("ascii")
            pieces.update((core, _urlsafe(core)))
    for prefix in _B64_PREFIXES:
        # The whole encodings (edges included); without padding, so that a padded text keeps only "==".
        full = base64.b64encode(prefix.encode() + raw).decode("ascii").rstrip("=")
        (pieces if not prefix else whole).update((full, _urlsafe(full)))
    return pieces, whole - pieces


def _urlsafe(b64: str) -> str:
    return b64.replace("+", "-").replace("/", "_")


def _telling(anchor: str) -> bool:
    """Whether a piece this short says enough to be masked wherever it appears (not ``00000000``)."""
    return len(set(anchor)) >= 4


@attrs.define
class _Anchor:
    """Occurrences of ``anchor`` in a text begin (or end) a piece of one of ``forms``."""

    anchor: str
    forms: list[str]


@attrs.define
class Redactor:
    """Replaces every registered secret value by ``***`` in strings and nested data (see the module doc)."""

    _secrets: set[str] = attrs.field(factory=set)
    _whole: list[str] = attrs.field(factory=list)
    _heads: list[_Anchor] = attrs.field(factory=list)
    _tails: list[_Anchor] = attrs.field(factory=list)
    #: Every text whose presence may call for masking (the whole forms and the pieces' anchors), as one pattern
    #: over UTF-8 bytes: a buffer it does not match is masked already (:meth:`mask_bytes`).
    _probe: re.Pattern[bytes] | None = None

    def add(self, *values: str | None) -> None:
        added = False
        for value in values:
            if value and len(value) >= MIN_SECRET_LENGTH and value not in self._secrets:
                self._secrets.add(value)
                added = True
        if added:
            self._compile()

    def _compile(self) -> None:
        pieces: set[str] = set()
        whole: set[str] = set()
        for secret in self._secrets:
            p, w = secret_forms(secret)
            pieces |= p
            whole |= w
        heads: dict[str, list[str]] = {}
        tails: dict[str, list[str]] = {}
        for form in pieces:
            head, tail = form[:MIN_FRAGMENT], form[-MIN_FRAGMENT:]
            if len(form) <= MIN_FRAGMENT or not _telling(head):
                whole.add(form)
            else:
                heads.setdefault(head, []).append(form)
            if len(form) > MIN_FRAGMENT and _telling(tail):
                tails.setdefault(tail, []).append(form)
        # Longest first: a secret that contains another is masked whole, an escaped form before the bare one.
        self._whole = sorted(whole, key=len, reverse=True)
        self._heads = sorted((_Anchor(a, f) for a, f in heads.items()), key=_longest, reverse=True)
        self._tails = sorted((_Anchor(a, f) for a, f in tails.items()), key=_longest, reverse=True)
        self._probe = _probe(sorted({*self._whole, *heads, *tails}, key=len, reverse=True))

    @property
    def active(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        if not self._secrets:
            return value
        for form in self._whole:
            if form in value:
                value = value.replace(form, MASK)
        for head in self._heads:
            value = _mask_heads(value, head)
        for tail in self._tails:
            value = _mask_tails(value, tail)
        return value

    def mask_bytes(self, data: bytes) -> bytes:
        """``data`` (UTF-8 text, e.g. a relayed stream's events) masked as :meth:`text` masks it: one pass of a
        compiled probe over the bytes, decoded and masked only when a secret's form may be in them (``data``
        itself when nothing is masked)."""
        if not self._secrets or not data:
            return data
        if self._probe is not None and self._probe.search(data) is None:
            return data
        text = data.decode("utf-8", errors="replace")
        masked = self.text(text)
        return data if masked is text else masked.encode()

    def data(self, value: Any) -> Any:
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.data(v) for v in value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            text = str(value)  # a secret of digits inside a number: the number becomes masked text
            masked = self.text(text)
            return value if masked == text else masked
        return value

    def structlog_processor(
        self, _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        """A structlog processor masking secrets in every field of an event."""
        return self.data(event_dict) if self._secrets else event_dict


def _probe(marks: list[str]) -> re.Pattern[bytes] | None:
    """One pattern finding any of ``marks`` in UTF-8 bytes; None when bytes cannot tell (a mark holding U+FFFD,
    which a bad byte decodes to, or a lone surrogate from an undecodable environment variable)."""
    try:
        encoded = [m.encode() for m in marks if "\ufffd" not in m]
    except UnicodeEncodeError:
        return None
    return re.compile(b"|".join(re.escape(m) for m in encoded)) if len(encoded) == len(marks) else None


def _longest(anchor: _Anchor) -> int:
    return max(len(f) for f in anchor.forms)


def _escaping(text: str, i: int) -> bool:
    """Whether the backslash at ``i`` starts an escape (is not itself escaped)."""
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 0


def _whole_escapes(text: str, start: int, end: int) -> tuple[int, int]:
    """``start``/``end`` widened so as not to split a JSON escape (``\\"``, ``\\u00e9``): masking half of
    one would leave the JSON text of a file invalid."""
    for b in range(max(0, start - 5), start):
        if text[b] == "\\" and _escaping(text, b):
            if b + (6 if text[b + 1:b + 2] == "u" else 2) > start:
                start = b
                break
    i = start
    while i < end:
        i += (6 if text[i + 1:i + 2] == "u" else 2) if text[i] == "\\" else 1
    return start, min(i, len(text))


def _common_prefix(text: str, start: int, form: str) -> int:
    """How many characters of ``form`` ``text`` repeats from ``start`` on (at least the anchor's)."""
    n = min(len(form), len(text) - start)
    k = MIN_FRAGMENT
    while k < n and text[start + k] == form[k]:
        k += 1
    return k


def _common_suffix(text: str, end: int, form: str, floor: int) -> int:
    """How many characters of ``form`` ``text`` repeats up to ``end``, not reaching before ``floor``."""
    k = MIN_FRAGMENT
    while k < len(form) and end - k - 1 >= floor and text[end - k - 1] == form[-k - 1]:
        k += 1
    return k


def _mask_heads(text: str, head: _Anchor) -> str:
    """Mask every run of ``text`` that begins one of the forms (the whole form included)."""
    i = text.find(head.anchor)
    if i < 0:
        return text
    out: list[str] = []
    last = 0
    while i >= 0:
        start, end = _whole_escapes(text, i, i + max(_common_prefix(text, i, form) for form in head.forms))
        start = max(start, last)
        out += (text[last:start], MASK)
        last = end
        i = text.find(head.anchor, end)
    out.append(text[last:])
    return "".join(out)


def _mask_tails(text: str, tail: _Anchor) -> str:
    """Mask every run of ``text`` that ends one of the forms."""
    i = text.find(tail.anchor)
    if i < 0:
        return text
    out: list[str] = []
    last = 0
    while i >= 0:
        end = i + MIN_FRAGMENT
        start = end - max(_common_suffix(text, end, form, last) for form in tail.forms)
        start, end = _whole_escapes(text, max(start, last), end)
        out += (text[last:start], MASK)
        last = end
        i = text.find(tail.anchor, end)
    out.append(text[last:])
    return "".join(out)
