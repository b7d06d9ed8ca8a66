"""Hidden tests of ``is_palindrome``. Each ``test_*`` function gets the submitted module."""


def test_simple(solution):
    assert solution.is_palindrome("racecar") is True
    assert solution.is_palindrome("abba") is True
    assert solution.is_palindrome("abc") is False


def test_empty_and_single(solution):
    assert solution.is_palindrome("") is True
    assert solution.is_palindrome("x") is True
    assert solution.is_palindrome("!?") is True


def test_case_insensitive(solution):
    assert solution.is_palindrome("RaceCar") is True
    assert solution.is_palindrome("Abc") is False


def test_ignores_punctuation(solution):
    assert solution.is_palindrome("A man, a plan, a canal: Panama") is True
    assert solution.is_palindrome("No 'x' in Nixon") is True
    assert solution.is_palindrome("race a car") is False


def test_digits(solution):
    assert solution.is_palindrome("12321") is True
    assert solution.is_palindrome("1a2") is False
    assert solution.is_palindrome("0P") is False
