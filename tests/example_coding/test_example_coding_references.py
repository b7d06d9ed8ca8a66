"""The shipped reference solutions agree with simple, independently written oracles on generated inputs."""

from __future__ import annotations

import copy
import itertools
import string
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from agentcompass_example_coding import tasks as task_data
from hypothesis import given
from hypothesis import strategies as st


def reference(task_id: str) -> Callable[..., Any]:
    coding_task = task_data.by_id(task_id)
    namespace: dict[str, Any] = {}
    exec(compile(coding_task.reference_solution, f"{task_id}.py", "exec"), namespace)
    return namespace[coding_task.entry_point]


fizzbuzz = reference("fizzbuzz")
roman = reference("roman")
is_palindrome = reference("is_palindrome")
word_count = reference("word_count")
flatten = reference("flatten")
merge_intervals = reference("merge_intervals")


@given(st.integers(min_value=-10, max_value=400))
def test_fizzbuzz(n: int) -> None:
    expected = [("Fizz" * (i % 3 == 0) + "Buzz" * (i % 5 == 0)) or str(i) for i in range(1, n + 1)]
    assert fizzbuzz(n) == expected


_ONES = ["", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX"]
_TENS = ["", "X", "XX", "XXX", "XL", "L", "LX", "LXX", "LXXX", "XC"]
_HUNDREDS = ["", "C", "CC", "CCC", "CD", "D", "DC", "DCC", "DCCC", "CM"]


@given(st.integers(min_value=1, max_value=3999))
def test_roman(n: int) -> None:
    expected = "M" * (n // 1000) + _HUNDREDS[n // 100 % 10] + _TENS[n // 10 % 10] + _ONES[n % 10]
    assert roman(n) == expected


@given(st.one_of(st.integers(max_value=0), st.integers(min_value=4000)))
def test_roman_out_of_range(n: int) -> None:
    with pytest.raises(ValueError):
        roman(n)


@given(st.text(alphabet=st.characters(codec="ascii")))
def test_is_palindrome_ascii(s: str) -> None:
    kept = "".join(c for c in s if c in string.ascii_letters + string.digits).lower()
    assert is_palindrome(s) is (kept == kept[::-1])


@given(st.text(), st.text(max_size=1))
def test_is_palindrome_mirrored(s: str, middle: str) -> None:
    assert is_palindrome(s + middle + s[::-1]) is True


@given(st.text())
def test_word_count(text: str) -> None:
    words, current = [], ""
    for c in text + " ":
        if c in string.ascii_letters + string.digits:
            current += c
        elif current:
            words.append(current.lower())
            current = ""
    assert word_count(text) == dict(Counter(words))


nested = st.recursive(
    st.integers() | st.text(max_size=3) | st.none(),
    lambda children: st.lists(children, max_size=4) | st.lists(children, max_size=4).map(tuple),
    max_leaves=30,
)


def _flatten_oracle(x: Any) -> list[Any]:
    if isinstance(x, list | tuple):
        return [leaf for item in x for leaf in _flatten_oracle(item)]
    return [x]


@given(st.lists(nested, max_size=6))
def test_flatten(xs: list[Any]) -> None:
    before = copy.deepcopy(xs)
    assert flatten(xs) == _flatten_oracle(xs)
    assert xs == before


intervals = st.lists(st.tuples(st.integers(-20, 20), st.integers(0, 6)).map(lambda p: (p[0], p[0] + p[1])), max_size=10)


@given(intervals)
def test_merge_intervals(xs: list[tuple[int, int]]) -> None:
    before = list(xs)
    out = merge_intervals(xs)
    assert xs == before
    assert all(isinstance(iv, tuple) and iv[0] <= iv[1] for iv in out)
    # sorted, and neither overlapping nor touching
    assert all(a[1] < b[0] for a, b in itertools.pairwise(out))
    # the same points covered, on a half-integer grid (so (1, 2) and (3, 4) stay apart)
    for p in range(-44, 60):
        x = p / 2
        assert any(s <= x <= e for s, e in xs) == any(s <= x <= e for s, e in out), x
