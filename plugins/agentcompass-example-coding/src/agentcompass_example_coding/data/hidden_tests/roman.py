"""Hidden tests of ``roman``. Each ``test_*`` function gets the submitted module."""


def test_single_symbols(solution):
    for n, s in [(1, "I"), (5, "V"), (10, "X"), (50, "L"), (100, "C"), (500, "D"), (1000, "M")]:
        assert solution.roman(n) == s, n


def test_subtractive(solution):
    for n, s in [(4, "IV"), (9, "IX"), (40, "XL"), (90, "XC"), (400, "CD"), (900, "CM")]:
        assert solution.roman(n) == s, n


def test_composite(solution):
    cases = [(3, "III"), (14, "XIV"), (58, "LVIII"), (1994, "MCMXCIV"), (2024, "MMXXIV"), (3999, "MMMCMXCIX")]
    for n, s in cases:
        assert solution.roman(n) == s, n


def test_out_of_range(solution):
    for bad in (0, -1, 4000):
        try:
            solution.roman(bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"roman({bad!r}) did not raise ValueError")


def test_round_trip(solution):
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    seen = set()
    for n in range(1, 4000):
        s = solution.roman(n)
        total = 0
        for i, symbol in enumerate(s):
            v = values[symbol]
            total += -v if i + 1 < len(s) and values[s[i + 1]] > v else v
        assert total == n, (n, s)
        seen.add(s)
    assert len(seen) == 3999
