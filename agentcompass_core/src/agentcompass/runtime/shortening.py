"""Shortening a text (an error, most often) to fit one line of a console, a table or a report row.

Every view that shortens an error uses :func:`shorten`, so they all cut the same way:

* whitespace, newlines included, collapses to single spaces (the result is one line);
* a text that fits is returned as it is;
* a longer one keeps its **head** and its **tail**, joined by ``" … "``, each cut at a word boundary when there
  is one within half its part (a longer word, a path or a URL, is cut where it must be);
* when the text holds one of the ``keep`` clauses (by default a replay miss's ``"first difference"``, the part
  that says what differs), that clause and what follows it take the tail's place: whole when they fit, else
  shortened themselves to their head and tail after a shorter head of the text.

The whole text stays where it was recorded: ``agentcompass results show RUN_DIR --task ID`` prints it.
"""

from __future__ import annotations

from collections.abc import Sequence

#: What marks a cut.
ELLIPSIS = "…"
#: What joins the head and the tail of a shortened text.
JOIN = f" {ELLIPSIS} "
#: The clauses an error is shortened around by default: what a replay miss says differs.
KEY_CLAUSES: tuple[str, ...] = ("first difference",)
#: Of the room a shortened text has, the share its head gets (the tail has the rest).
HEAD_SHARE = 0.6
#: Of the room a shortened text has, the share its head gets when a ``keep`` clause is too long to keep whole
#: (the clause has the rest, itself shortened to its head and its tail).
CONTEXT_SHARE = 0.25
#: A head shorter than this is left out (``"… "`` and the clause) rather than shown as a fragment.
MIN_HEAD = 12
#: Narrower than this, a text is cut at ``width`` characters and nothing more is attempted.
MIN_WIDTH = 8


def shorten(text: object, width: int, *, keep: Sequence[str] = KEY_CLAUSES) -> str:
    """``text`` on one line of at most ``width`` characters (see the module's documentation)."""
    flat = " ".join(str(text).split())
    if len(flat) <= width:
        return flat
    if width < MIN_WIDTH:
        return flat[:max(width, 0)]
    at = _clause(flat, keep)
    if at:
        clause = flat[at:]
        room = width - len(JOIN) - len(clause)
        if room >= 0:
            head = _head(flat[:at].rstrip(), room) if room >= MIN_HEAD else ""
            return f"{head}{JOIN}{clause}" if head else f"{ELLIPSIS} {clause}"
        head = _head(flat[:at].rstrip(), int((width - len(JOIN)) * CONTEXT_SHARE))
        if not head:
            return f"{ELLIPSIS} {shorten(clause, width - 2, keep=())}"
        return f"{head}{JOIN}{shorten(clause, width - len(head) - len(JOIN), keep=())}"
    room = width - len(JOIN)
    head = _head(flat, int(room * HEAD_SHARE))
    return f"{head}{JOIN}{_tail(flat, room - len(head))}"


def _clause(text: str, keep: Sequence[str]) -> int | None:
    found = [i for i in (text.find(k) for k in keep if k) if i >= 0]
    return min(found) if found else None


def _head(text: str, n: int) -> str:
    """At most ``n`` characters from the start of ``text``, ending at a word boundary within reach."""
    if len(text) <= n:
        return text
    if n <= 0:
        return ""
    cut = text.rfind(" ", 0, n + 1)
    if cut > 0 and n - cut <= n // 2:
        return text[:cut].rstrip()
    return text[:n]


def _tail(text: str, n: int) -> str:
    """At most ``n`` characters from the end of ``text``, starting at a word boundary within reach."""
    if len(text) <= n:
        return text
    if n <= 0:
        return ""
    start = len(text) - n
    if text[start - 1] == " ":
        return text[start:]
    space = text.find(" ", start)
    if space != -1 and space - start <= n // 2:
        return text[space + 1:]
    return text[start:]
