"""One way of shortening an error to a line (issue 32, item 5): within the width, cut at word boundaries, the
clause that says what differs kept."""

from __future__ import annotations

from agentcompass.runtime.shortening import ELLIPSIS, shorten
from hypothesis import given
from hypothesis import strategies as st

words = st.lists(st.text("abcdefghijklmnopqrstuvwxyz0123456789.:'/", min_size=1, max_size=6), min_size=1,
                 max_size=120)
separators = st.sampled_from([" ", "  ", "\n", "\n    ", "\t"])


@st.composite
def texts(draw):
    ws = draw(words)
    return "".join(w + draw(separators) for w in ws[:-1]) + ws[-1], ws


@given(texts(), st.integers(40, 300))
def test_a_shortened_text_is_one_line_within_the_width_made_of_whole_words(drawn, width):
    text, ws = drawn
    short = shorten(text, width)
    assert len(short) <= width and "\n" not in short and "  " not in short
    if len(" ".join(ws)) <= width:
        assert short == " ".join(ws)  # it fits: nothing is cut
    else:
        assert ELLIPSIS in short
        assert all(part in ws for part in short.split() if part != ELLIPSIS)  # never cut mid-word
        assert short.startswith(ws[0])  # the head is kept


@given(texts(), texts(), st.integers(60, 240))
def test_the_first_difference_clause_is_kept(before, after, width):
    (head, _), (detail, detail_words) = before, after
    text = f"replay miss: {head}; first difference from recorded agent call 1: {detail}"
    short = shorten(text, width)
    assert len(short) <= width and "first difference" in short and short.startswith(("replay", "…"))
    clause = "first difference from recorded agent call 1: " + " ".join(detail_words)
    if len(clause) + 3 <= width:
        assert short.endswith(clause)  # the whole clause, when it fits
    else:
        assert short.endswith(detail_words[-1])  # else its head and its tail


def test_the_issues_replay_miss_keeps_what_differs():
    error = ("replay miss: task 'roman' (trial 1), agent call 1: not in the recording "
             "/tmp/pytest-of-root/pytest-12/replay0/live/calls; first difference from recorded agent call 1: "
             "messages[0].content differs:\n    -You are an autonomous agent. Work in <tmp>.\n"
             "    +You are terse. Work in <tmp>.")
    short = shorten(error, 240)
    assert short.startswith("replay miss: task 'roman' (trial 1), agent call 1:")
    assert short.endswith("-You are an autonomous agent. Work in <tmp>. +You are terse. Work in <tmp>.")
    assert len(short) <= 240


def test_a_word_longer_than_reach_is_cut_and_short_widths_do_not_fail():
    assert len(shorten("x" * 500, 50)) <= 50
    assert shorten("a" * 20, 5) == "aaaaa"
    assert shorten("short", 80) == "short"
