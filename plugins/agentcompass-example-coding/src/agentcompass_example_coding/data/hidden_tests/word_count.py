"""Hidden tests of ``word_count``. Each ``test_*`` function gets the submitted module."""


def test_example(solution):
    assert solution.word_count("The cat; the HAT.") == {"the": 2, "cat": 1, "hat": 1}


def test_empty(solution):
    assert solution.word_count("") == {}
    assert solution.word_count("  ,;  ") == {}


def test_separators(solution):
    assert solution.word_count("a-b_c\td\ne") == {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}
    assert solution.word_count("don't stop") == {"don": 1, "t": 1, "stop": 1}


def test_digits(solution):
    assert solution.word_count("route 66, Route 66!") == {"route": 2, "66": 2}


def test_returns_plain_counts(solution):
    out = solution.word_count("b a b")
    assert dict(out) == {"a": 1, "b": 2}
    assert all(isinstance(v, int) for v in out.values())
