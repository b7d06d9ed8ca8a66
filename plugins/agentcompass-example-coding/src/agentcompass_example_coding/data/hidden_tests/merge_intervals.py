"""Hidden tests of ``merge_intervals``. Each ``test_*`` function gets the submitted module."""


def _norm(out):
    return [tuple(x) for x in out]


def test_empty_and_single(solution):
    assert _norm(solution.merge_intervals([])) == []
    assert _norm(solution.merge_intervals([(1, 3)])) == [(1, 3)]


def test_overlapping(solution):
    assert _norm(solution.merge_intervals([(1, 3), (2, 6), (8, 10), (15, 18)])) == [(1, 6), (8, 10), (15, 18)]


def test_touching_and_apart(solution):
    assert _norm(solution.merge_intervals([(1, 2), (2, 5)])) == [(1, 5)]
    assert _norm(solution.merge_intervals([(1, 2), (3, 4)])) == [(1, 2), (3, 4)]


def test_unsorted_and_nested(solution):
    assert _norm(solution.merge_intervals([(5, 6), (1, 10), (2, 3), (12, 12)])) == [(1, 10), (12, 12)]


def test_returns_tuples_and_keeps_input(solution):
    xs = [(4, 5), (1, 2)]
    out = solution.merge_intervals(xs)
    assert out == [(1, 2), (4, 5)]
    assert all(isinstance(x, tuple) for x in out)
    assert xs == [(4, 5), (1, 2)]
